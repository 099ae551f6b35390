// The node's further operations through the engine with the fake runner:
// staged image archives, a unit rewrite without a restart, a soft reboot,
// host kernel modules, files a changed configuration no longer writes.

import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CA, makeImage, makeRig, ok, type Rig } from '../../support/node/graph-rig.ts';
import type { FakeEvent } from '../../support/fake-runner.ts';
import { story as storyOf } from '../../support/node/story.ts';
import type { Plan } from '../../../src/plan/plan.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

/** The events these tests follow, as short words (test/support/node/story.ts). */
const FOLLOWED = new Set<FakeEvent['kind']>(['container-start', 'container-stop', 'service-start', 'service-boot', 'service-restart', 'host-unit', 'image-import', 'image-remove', 'modprobe']);
const story = (events: readonly FakeEvent[]): string[] => storyOf(events, FOLLOWED);

/** Plan entries that do something, as `id: verb (reasons)`, without the short hashes a reason shows. */
const changes = (plan: Plan): string[] =>
  plan
    .entries()
    .filter((e) => e.action !== 'unchanged')
    .map((e) => `${e.id}: ${e.verb} (${e.reasons.join('; ').replace(/ [0-9a-f]{8}→[0-9a-f]{8}/g, '')})`);

const IMAGES = '/var/lib/nodegraph-images';

describe('staged image archives', () => {
  const stage = (name: string, content: string): void => {
    mkdirSync(path.join(rig.root, IMAGES), { recursive: true });
    writeFileSync(path.join(rig.root, IMAGES, name), content);
  };
  const refs = (): string[] => [...(rig.runner.images.get('kube1')?.keys() ?? [])].sort();

  it('imports each archive once containerd runs, and again only when it changed or the rootfs is new', async () => {
    rig = makeRig({ imageArchiveDir: IMAGES });
    stage('pause.tar', 'pause one');
    stage('coredns.tar', 'coredns one');
    rig.writeConfig();
    const first = ok(await rig.plan()).plan;
    expect(changes(first).filter((c) => c.includes('/image/'))).toEqual([
      'kube1/image/coredns.tar: import (never ran)',
      'kube1/image/pause.tar: import (never ran)',
    ]);
    ok(await rig.apply());
    // After containerd started, never before (kubelet starts meanwhile, in either order).
    const order = story(rig.runner.events);
    expect(order.filter((s) => s.startsWith('import'))).toEqual(['import coredns.tar', 'import pause.tar']);
    expect(order.indexOf('import coredns.tar')).toBeGreaterThan(order.indexOf('start containerd'));
    expect(order.indexOf('import pause.tar')).toBeGreaterThan(order.indexOf('start containerd'));
    expect(refs()).toEqual(['nodegraph.test/coredns:1', 'nodegraph.test/pause:1']);
    // The archives' folder is in the container at the same path, read-only.
    const bundle = JSON.parse(readFileSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/config.json'), 'utf8'));
    expect(bundle.mounts).toContainEqual({ destination: IMAGES, type: 'bind', source: path.join(rig.root, IMAGES), options: ['rbind', 'ro'] });

    // Unchanged: nothing imported.
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual([]);

    // One archive changed: it alone is imported again, and the plan says why.
    stage('pause.tar', 'pause two');
    expect(changes(ok(await rig.plan()).plan)).toEqual(['kube1/image/pause.tar: import (input archive changed)']);
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual(['kube1/image/pause.tar']);
    expect(story(rig.runner.events)).toEqual(['import pause.tar']);

    // containerd restarts (its configuration changed): its image store stays, nothing is imported.
    rig.writeConfig((c) => ({ ...c, registryMirrors: {} }));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['restart containerd']);

    // The container restarts (its bundle changed): the store is in the rootfs, nothing is imported.
    rig.writeConfig((c) => ({ ...c, bundle: { annotations: { 'example.com/x': 'y' } } }));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'boot containerd', 'boot kubelet']);

    // A new rootfs is an empty store: every archive is imported again.
    rig.runner.images.delete('kube1');
    rig.writeConfig((c) => ({ ...c, image: makeImage(rig.dir, 'image2.tar.gz', 'two') }));
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().find((e) => e.id === 'kube1/image/pause.tar')).toMatchObject({ action: 'maybe', verb: 'may import', reasons: ['known after kube1/rootfs'] });
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events).filter((s) => s.startsWith('import'))).toEqual(['import coredns.tar', 'import pause.tar']);
    expect(refs()).toEqual(['nodegraph.test/coredns:1', 'nodegraph.test/pause:1']);
  });

  it('leaves the images of an archive taken away in containerd, and says so; prunes them when asked', async () => {
    rig = makeRig({ imageArchiveDir: IMAGES });
    stage('pause.tar', 'pause');
    stage('coredns.tar', 'coredns');
    rig.writeConfig();
    ok(await rig.apply());
    rmSync(path.join(rig.root, IMAGES, 'coredns.tar'));
    expect(changes(ok(await rig.plan()).plan)).toEqual(['kube1/image/coredns.tar: leave in containerd (input archive changed; no longer consumes kube1/rootfs)']);
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual(['kube1/image/coredns.tar']);
    expect(story(rig.runner.events)).toEqual([]);
    expect(refs()).toEqual(['nodegraph.test/coredns:1', 'nodegraph.test/pause:1']);
    expect(changes(ok(await rig.plan()).plan)).toEqual([]);

    rig.writeConfig((c) => ({ ...c, imageArchivePrune: true }));
    expect(changes(ok(await rig.plan()).plan)).toEqual([
      'host/config: update (input file changed)',
      'kube1/image/coredns.tar: prune from containerd (input archive changed: prune: false → true)',
    ]);
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['remove nodegraph.test/coredns:1']);
    expect(refs()).toEqual(['nodegraph.test/pause:1']);
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual([]);

    // Staged again: imported again.
    stage('coredns.tar', 'coredns');
    expect(changes(ok(await rig.plan()).plan)).toEqual(['kube1/image/coredns.tar: import (input archive changed; now consumes kube1/rootfs)']);
    ok(await rig.apply());
    expect(refs()).toEqual(['nodegraph.test/coredns:1', 'nodegraph.test/pause:1']);
  });

  it("fails the task of an archive containerd cannot import, with containerd's words, and the others still import", async () => {
    rig = makeRig({ imageArchiveDir: IMAGES });
    stage('pause.tar', 'pause');
    stage('bad.tar', 'not an archive');
    rig.writeConfig();
    // Not atomic: the failure as it is left, not undone.
    const summary = ok(await rig.apply({ atomic: false }));
    expect(summary.failed).toEqual(['kube1/image/bad.tar']);
    const done = rig.events.find((e) => e.type === 'task-done' && e.id === 'kube1/image/bad.tar' && e.outcome === 'failed');
    expect(done && 'error' in done && done.error).toBe(`containerd could not import ${IMAGES}/bad.tar: ctr: unexpected EOF`);
    expect(refs()).toEqual(['nodegraph.test/pause:1']);
  });

  it('refuses an archive name a task id cannot hold, naming it', async () => {
    rig = makeRig({ imageArchiveDir: IMAGES });
    stage('my image.tar', 'x');
    rig.writeConfig();
    const result = await rig.plan();
    expect(result.ok).toBe(false);
    expect(JSON.stringify(!result.ok && result.error)).toContain(`rename \\"my image.tar\\"`);
  });
});

describe('a unit rewrite without a restart (systemd supervisor)', () => {
  it('reloads systemd when only the unit changed, and restarts the container only when what it runs changed', async () => {
    rig = makeRig({ supervisor: 'systemd' });
    ok(await rig.apply());
    const unit = path.join(rig.root, 'etc/systemd/system/nodegraph-kube1.service');
    expect(readFileSync(unit, 'utf8')).toContain('TimeoutStopSec=1\n');

    // The stop timeout is the unit's, not the running container's.
    rig.writeConfig((c) => ({ ...c, timeouts: { ...c.timeouts!, stop: 30 } }));
    expect(changes(ok(await rig.plan()).plan)).toEqual([
      'host/config: update (input file changed)',
      // The value's change, line by line: the unit's stop timeout.
      'kube1/unit: reload (input unit changed: line 15: "TimeoutStopSec=1" → "TimeoutStopSec=30")',
    ]);
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.ran).toEqual(['host/config', 'kube1/unit']);
    expect(story(rig.runner.events)).toEqual(['host daemon-reload']);
    expect(readFileSync(unit, 'utf8')).toContain('TimeoutStopSec=30\n');

    // The bundle is what the container is: restart.
    rig.writeConfig((c) => ({ ...c, bundle: { annotations: { 'example.com/x': 'y' } } }));
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().find((e) => e.id === 'kube1/container')).toMatchObject({ verb: 'may restart', reasons: ['known after kube1/bundle'] });
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual([
      'host daemon-reload',
      'host enable nodegraph-kube1.service',
      'host restart nodegraph-kube1.service',
      'container-stop kube1',
      'container-start kube1',
      'boot containerd',
      'boot kubelet',
    ]);

    // So is the command that runs it (here, the runc binary): the unit is rewritten and the container restarts.
    rig.writeConfig((c) => ({ ...c, runtime: { runc: '/usr/local/sbin/runc' } }));
    const again = changes(ok(await rig.plan()).plan);
    expect(again).toContainEqual(expect.stringMatching(/^kube1\/unit: reload \(input unit changed: line \d+: .*\/usr\/local\/sbin\/runc/));
    expect(again).toContainEqual(expect.stringMatching(/^kube1\/container: restart \(input spec changed/));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events).filter((s) => s.startsWith('container-'))).toEqual(['container-stop kube1', 'container-start kube1']);
    expect(readFileSync(unit, 'utf8')).toContain('ExecStart=/usr/local/sbin/runc ');
  });
});

describe('soft reboot: --replace kube1/container', () => {
  it('restarts the container alone; systemd inside starts the services, nodegraph waits and restarts nothing', async () => {
    rig = makeRig();
    ok(await rig.apply());
    const plan = ok(await rig.plan({ replace: ['kube1/container'] })).plan;
    expect(changes(plan)).toEqual([
      'kube1/container: replace (forced by --replace)',
      'kube1/containerd: may start (known after kube1/container)',
      'kube1/kubelet: may start (known after kube1/container)',
      'kube1/verified: may verify (known after kube1/containerd; known after kube1/kubelet)',
    ]);
    rig.runner.reset();
    const summary = ok(await rig.apply({ replace: ['kube1/container'] }));
    expect([...summary.ran].sort()).toEqual(['kube1/container', 'kube1/containerd', 'kube1/kubelet', 'kube1/verified']);
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'boot containerd', 'boot kubelet']);
    // Only waits inside: no start, restart or enable.
    expect(rig.runner.commands().filter((c) => / systemctl (start|restart|enable) /.test(c))).toEqual([]);
  });
});

describe('host kernel modules', () => {
  const conf = (): string => path.join(rig.root, 'etc/modules-load.d/nodegraph.conf');

  it('lists them for boot, loads what is missing, skips what is loaded or built in', async () => {
    rig = makeRig({ kernelModules: ['overlay', 'br_netfilter', 'nf_conntrack'] }, { builtinModules: ['overlay'] });
    const summary = ok(await rig.apply());
    expect(summary.failed).toEqual([]);
    expect(readFileSync(conf(), 'utf8')).toBe('# Written by nodegraph: kernel modules the Kubernetes node needs, loaded at boot.\noverlay\nbr_netfilter\nnf_conntrack\n');
    expect(story(rig.runner.events).filter((s) => s.startsWith('modprobe'))).toEqual(['modprobe br_netfilter', 'modprobe nf_conntrack']);
    // Before the container starts.
    expect(summary.ran.indexOf('host/kernel-modules' as never)).toBeLessThan(summary.ran.indexOf('kube1/container' as never));
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual([]);
    expect(story(rig.runner.events)).toEqual([]);
    // A module unloaded behind nodegraph's back is drift: loaded again.
    rig.runner.loadedModules.delete('br_netfilter');
    expect(changes(ok(await rig.plan()).plan)).toEqual(['host/kernel-modules: load (check failed: not loaded: br_netfilter)']);
  });

  it('fails with the name of a module that cannot be loaded', async () => {
    rig = makeRig({ kernelModules: ['overlay', 'nodegraph_missing'] }, { missingModules: ['nodegraph_missing'] });
    // Not atomic: the failure as it is left, not undone.
    const summary = ok(await rig.apply({ atomic: false }));
    expect(summary.failed).toEqual(['host/kernel-modules']);
    const done = rig.events.find((e) => e.type === 'task-done' && e.id === 'host/kernel-modules' && e.outcome === 'failed');
    expect(done && 'error' in done && done.error).toBe(
      'kernel module nodegraph_missing is neither loaded nor built in (/proc/modules, /sys/module), and modprobe nodegraph_missing failed: modprobe: FATAL: Module nodegraph_missing not found in directory /lib/modules/6.1.0-fake',
    );
    // The container was not started without it.
    expect(rig.runner.containers.size).toBe(0);
  });

  it('keeps the list while a slot remains, and destroy removes it after the slots', async () => {
    rig = makeRig({ kernelModules: ['br_netfilter'] });
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, slot: 'kube2' }));
    ok(await rig.apply());
    // kube1 went; kube2 still needs the modules.
    expect(existsSync(conf())).toBe(true);
    const result = ok(await rig.destroy());
    expect(result.failed).toEqual([]);
    const order = result.order.map(String);
    expect(order.indexOf('host/kernel-modules')).toBeGreaterThan(order.indexOf('kube2/container'));
    expect(existsSync(conf())).toBe(false);
    // Modules are left loaded: nothing unloads them.
    expect(rig.runner.commands().filter((c) => c.includes('rmmod') || c.includes('modprobe -r'))).toEqual([]);
  });
});

describe('files a changed configuration no longer writes', () => {
  it("removes the registry hosts under an old containerd.certsDir, and keeps a file nodegraph did not write there", async () => {
    rig = makeRig();
    ok(await rig.apply());
    const old = path.join(rig.root, 'etc/containerd/certs.d');
    mkdirSync(path.join(old, 'theirs.example'));
    writeFileSync(path.join(old, 'theirs.example/hosts.toml'), 'server = "https://theirs.example"\n');
    rig.writeConfig((c) => ({ ...c, containerd: { certsDir: '/etc/containerd/registries' } }));
    ok(await rig.apply());
    expect(existsSync(path.join(rig.root, 'etc/containerd/registries/docker.io/hosts.toml'))).toBe(true);
    expect(readdirSync(old)).toEqual(['theirs.example']);
    expect(readFileSync(path.join(old, 'theirs.example/hosts.toml'), 'utf8')).toBe('server = "https://theirs.example"\n');
  });

  it("removes the client certificate's files when a bootstrap token replaces it, and the token's kubeconfig when a certificate replaces it", async () => {
    rig = makeRig();
    const key = '-----BEGIN PRIVATE KEY-----\nMIIfake\n-----END PRIVATE KEY-----\n';
    writeFileSync(path.join(rig.dir, 'client.crt'), CA);
    writeFileSync(path.join(rig.dir, 'client.key'), key);
    const certificate = { server: 'https://10.0.0.1:6443', caData: CA, clientCertificateFile: 'client.crt', clientKeyFile: 'client.key' };
    const token = { server: 'https://10.0.0.1:6443', caData: CA, bootstrapToken: 'abcdef.0123456789abcdef' };
    const kubelet = path.join(rig.root, 'var/lib/kubelet');
    const files = (): string[] => [...readdirSync(kubelet).filter((f) => f.includes('kubeconfig')), ...readdirSync(path.join(kubelet, 'pki')).map((f) => `pki/${f}`)].sort();
    rig.writeConfig((c) => ({ ...c, cluster: certificate }));
    ok(await rig.apply());
    expect(files()).toEqual(['kubeconfig', 'pki/ca.crt', 'pki/nodegraph-client.crt', 'pki/nodegraph-client.key']);
    // What kubelet writes itself stays.
    writeFileSync(path.join(kubelet, 'pki/kubelet.crt'), CA);
    rig.writeConfig((c) => ({ ...c, cluster: token }));
    ok(await rig.apply());
    expect(files()).toEqual(['bootstrap-kubeconfig', 'pki/ca.crt', 'pki/kubelet.crt']);
    rig.writeConfig((c) => ({ ...c, cluster: certificate }));
    ok(await rig.apply());
    expect(files()).toEqual(['kubeconfig', 'pki/ca.crt', 'pki/kubelet.crt', 'pki/nodegraph-client.crt', 'pki/nodegraph-client.key']);
  });
});
