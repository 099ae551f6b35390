// A slot's configuration tasks (src/node/slot-config.ts): what each writes into the rootfs and the
// shared folders, run against the fake runner (they run no command).

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cniSettingsSchema } from '../../../src/node/cni.ts';
import { containerdSettingsSchema } from '../../../src/node/containerd.ts';
import { kubeletSettingsSchema } from '../../../src/node/kubelet.ts';
import { cniConfigTask, containerdConfigTask, kubeletConfigTask } from '../../../src/node/slot-config.ts';
import type { FakeRunner } from '../../support/fake-runner.ts';
import { CA } from '../../support/node/graph-rig.ts';
import { afterIds, declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
beforeEach(() => ({ dir, runner } = sandbox('slot-config')));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const base = (d: ReturnType<typeof declared>) => ({
  slot: 'kube1',
  rootfsDir: path.join(dir, 'layout/kube1/rootfs'),
  rootfs: d.ng.ref('kube1/rootfs'),
  after: [d.ng.ref('kube1/takeover')],
});

describe('containerd.config', () => {
  it("writes config.toml into the rootfs and each registry's hosts.toml; a registry no longer named goes, someone else's stays", async () => {
    const d = declared();
    const certsDir = path.join(dir, 'etc/containerd/certs.d');
    let nvidia = false;
    const spec = {
      ...base(d),
      settings: containerdSettingsSchema.parse({}),
      registryMirrors: { 'docker.io': ['https://mirror.example'] },
      certsDir,
      hostPath: (p: string) => path.join(dir, p),
      nvidia: () => nvidia,
    };
    containerdConfigTask(d.ng, spec);
    const task = d.spec('kube1/containerd.config');
    const toml = path.join(dir, 'layout/kube1/rootfs/etc/containerd/config.toml');
    expect(task.outputs).toEqual([toml, path.join(certsDir, 'docker.io/hosts.toml')]);
    expect(task.removeOutputs).toBe('dropped');
    expect(afterIds(task)).toEqual(['kube1/takeover']);
    // Earlier writes: a registry nodegraph wrote and no longer names, and one someone else wrote.
    mkdirSync(path.join(certsDir, 'old.example'), { recursive: true });
    writeFileSync(path.join(certsDir, 'old.example/hosts.toml'), '# Written by nodegraph\n');
    mkdirSync(path.join(certsDir, 'theirs.example'), { recursive: true });
    writeFileSync(path.join(certsDir, 'theirs.example/hosts.toml'), 'server = "https://theirs.example"\n');
    await runOf('kube1/containerd.config', task, runner);
    expect(readFileSync(toml, 'utf8')).toContain('sandbox_image = "registry.k8s.io/pause:3.9"');
    expect(readFileSync(toml, 'utf8')).not.toContain('nvidia');
    expect(readFileSync(path.join(certsDir, 'docker.io/hosts.toml'), 'utf8')).toContain('https://mirror.example');
    expect(existsSync(path.join(certsDir, 'old.example'))).toBe(false);
    expect(existsSync(path.join(certsDir, 'theirs.example/hosts.toml'))).toBe(true);
    // The GPU grants are read when it runs.
    nvidia = true;
    await runOf('kube1/containerd.config', task, runner);
    expect(readFileSync(toml, 'utf8')).toContain('nvidia');
    expect(runner.calls).toEqual([]);
  });
});

describe('kubelet.config', () => {
  it("writes kubelet's shared files at the host's paths and its drop-in into the rootfs", async () => {
    const d = declared();
    const settings = kubeletSettingsSchema.parse({
      nodeName: 'node-a',
      server: 'https://10.0.0.1:6443',
      caData: CA,
      auth: { bootstrapToken: 'abcdef.0123456789abcdef' },
      clusterDNS: ['10.96.0.10'],
    });
    kubeletConfigTask(d.ng, { ...base(d), settings, hostPath: (p) => path.join(dir, p) });
    const task = d.spec('kube1/kubelet.config');
    const dropIn = path.join(dir, 'layout/kube1/rootfs/etc/systemd/system/kubelet.service.d/10-nodegraph.conf');
    expect(task.outputs).toContain(dropIn);
    expect(task.outputs!.filter((o) => o.startsWith(path.join(dir, 'var/lib/kubelet/'))).length).toBeGreaterThan(0);
    await runOf('kube1/kubelet.config', task, runner);
    for (const output of task.outputs!) expect(existsSync(output), output).toBe(true);
    expect(readFileSync(dropIn, 'utf8')).toContain('/usr/local/bin/kubelet');
    expect(runner.calls).toEqual([]);
  });
});

describe('cni.config', () => {
  it("writes the conflist into containerd's CNI folder in the rootfs", async () => {
    const d = declared();
    cniConfigTask(d.ng, { ...base(d), settings: cniSettingsSchema.parse({ bridge: 'cni7' }), confDir: '/etc/cni/net.d' });
    const task = d.spec('kube1/cni.config');
    const file = path.join(dir, 'layout/kube1/rootfs/etc/cni/net.d/10-nodegraph.conflist');
    expect(task.outputs).toEqual([file]);
    await runOf('kube1/cni.config', task, runner);
    expect(JSON.parse(readFileSync(file, 'utf8')).plugins[0].bridge).toBe('cni7');
    expect(runner.calls).toEqual([]);
  });
});
