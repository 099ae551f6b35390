import { describe, expect, it } from 'vitest';
import { importedRefs, parseImageList, pruneImages } from '../../../src/node/images.ts';
import { scriptedExec } from '../../support/exec.ts';
import { parseModuleStates } from '../../../src/node/kernel-modules.ts';

// As containerd 1.6.20's ctr printed them in the e2e node.
const IMPORT = 'unpacking nodegraph.test/hello:1 (sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24)...done\n';
const LIST = `REF                                                                     TYPE                                       DIGEST                                                                  SIZE     PLATFORMS   LABELS
nodegraph.test/hello:1                                                  application/vnd.oci.image.manifest.v1+json sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24 10.6 KiB linux/amd64 io.cri-containerd.image=managed
sha256:6022cb63f8568c15ae27b3c9c6189e9c86cf444cb2f51539e6969b6ffeaee267 application/vnd.oci.image.manifest.v1+json sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24 10.6 KiB linux/amd64 io.cri-containerd.image=managed
`;

describe('ctr output', () => {
  it('names the images an import created', () => {
    expect(importedRefs(IMPORT)).toEqual(['nodegraph.test/hello:1']);
    expect(importedRefs(`${IMPORT}${IMPORT}`)).toEqual(['nodegraph.test/hello:1']);
    expect(importedRefs('')).toEqual([]);
  });

  it('reads the image list: each name and the manifest it points at', () => {
    expect(parseImageList(LIST)).toEqual([
      { ref: 'nodegraph.test/hello:1', digest: 'sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24' },
      { ref: 'sha256:6022cb63f8568c15ae27b3c9c6189e9c86cf444cb2f51539e6969b6ffeaee267', digest: 'sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24' },
    ]);
    expect(parseImageList('REF TYPE DIGEST SIZE PLATFORMS LABELS\n')).toEqual([]);
  });
});

describe('pruning an archive\'s images', () => {
  const runc = { binary: '/usr/sbin/runc' };
  const OTHER = 'registry.k8s.io/pause:3.9 application/vnd.oci.image.manifest.v1+json sha256:987bad84f5517ec3ee74dd7d609cec3e68abb79f51eba2f8f7ad5c3309d87d24 1 KiB linux/amd64 -\n';

  it("removes its names and the CRI's sha256: name of the same manifest", async () => {
    const { exec, calls } = scriptedExec((argv) => (argv.includes('ls') ? { stdout: LIST } : {}));
    expect(await pruneImages(exec, runc, 'kube1', ['nodegraph.test/hello:1'])).toEqual([
      'nodegraph.test/hello:1',
      'sha256:6022cb63f8568c15ae27b3c9c6189e9c86cf444cb2f51539e6969b6ffeaee267',
    ]);
    expect(calls.at(-1)).toEqual([
      '/usr/sbin/runc', 'exec', 'kube1', 'ctr', '-n', 'k8s.io', 'images', 'rm',
      'nodegraph.test/hello:1', 'sha256:6022cb63f8568c15ae27b3c9c6189e9c86cf444cb2f51539e6969b6ffeaee267',
    ]);
  });

  it('keeps the sha256: name while another name still points at the manifest, and runs no rm for nothing', async () => {
    const { exec } = scriptedExec((argv) => (argv.includes('ls') ? { stdout: LIST + OTHER } : {}));
    expect(await pruneImages(exec, runc, 'kube1', ['nodegraph.test/hello:1'])).toEqual(['nodegraph.test/hello:1']);
    const none = scriptedExec((argv) => (argv.includes('ls') ? { stdout: LIST } : {}));
    expect(await pruneImages(none.exec, runc, 'kube1', ['gone/image:1'])).toEqual([]);
    expect(none.calls.filter((c) => c.includes('rm'))).toEqual([]);
  });
});

describe('kernel module states', () => {
  it('reads the helper lines, ignoring anything else', () => {
    expect([...parseModuleStates('overlay built-in\nbr_netfilter loaded\nfoo missing\nnoise\n')]).toEqual([
      ['overlay', 'built-in'],
      ['br_netfilter', 'loaded'],
      ['foo', 'missing'],
    ]);
  });
});
