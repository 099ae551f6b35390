import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRig, NODEFILE, ok, type Rig } from '../../support/node/graph-rig.ts';
import { teardownNodefile } from '../../../src/operations.ts';
import type { FakeEvent } from '../../support/fake-runner.ts';
import { story as storyOf } from '../../support/node/story.ts';
import { describeTree } from '../../support/tree.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

/** The events these tests follow, as short words (test/support/node/story.ts). */
const FOLLOWED = new Set<FakeEvent['kind']>(['container-start', 'container-stop', 'service-start', 'service-boot', 'service-restart', 'service-stop']);
const story = (events: readonly FakeEvent[]): string[] => storyOf(events, FOLLOWED);

describe('graphs/container-node.ts with a fake runner', () => {
  it('brings the node up on the first apply, in order', async () => {
    rig = makeRig();
    const summary = ok(await rig.apply());
    expect(summary.failed).toEqual([]);
    expect(story(rig.runner.events)).toEqual(['container-start kube1', 'start containerd', 'start kubelet']);
    const c = rig.runner.containers.get('kube1')!;
    expect(c.status).toBe('running');
    expect(c.services.get('containerd')?.active).toBe(true);
    expect(c.services.get('kubelet')?.active).toBe(true);
    const slot = path.join(rig.root, 'var/lib/nodegraph/containers/kube1');
    expect(existsSync(path.join(slot, 'rootfs/sbin/init'))).toBe(true);
    expect(existsSync(path.join(slot, 'config.json'))).toBe(true);
    expect(existsSync(path.join(slot, 'rootfs/etc/containerd/config.toml'))).toBe(true);
    expect(existsSync(path.join(rig.root, 'etc/containerd/certs.d/docker.io/hosts.toml'))).toBe(true);
    expect(existsSync(path.join(rig.root, 'var/lib/kubelet/config.yaml'))).toBe(true);
    expect(summary.ran.indexOf('kube1/containerd' as never)).toBeLessThan(summary.ran.indexOf('kube1/kubelet' as never));
    expect(summary.ran).toContain('kube1/verified');
  });

  it('does nothing on a second apply', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.ran).toEqual([]);
    expect(story(rig.runner.events)).toEqual([]);
    const plan = ok(await rig.plan());
    expect(plan.plan.entries().filter((e) => e.action !== 'unchanged')).toEqual([]);
  });

  it('restarts only containerd when only a registry mirror changed', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, registryMirrors: { 'docker.io': ['https://other-mirror.example.com'] } }));
    const plan = ok(await rig.plan()).plan;
    const entry = (id: string) => plan.entries().find((e) => e.id === id);
    expect(entry('kube1/containerd.config')?.action).toBe('update');
    expect(entry('kube1/containerd')?.verb).toBe('may restart');
    expect(entry('kube1/kubelet')?.action).toBe('unchanged');
    expect(entry('kube1/container')?.action).toBe('unchanged');
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['restart containerd']);
    expect(summary.ran).not.toContain('kube1/kubelet');
    const hosts = readFileSync(path.join(rig.root, 'etc/containerd/certs.d/docker.io/hosts.toml'), 'utf8');
    expect(hosts).toContain('other-mirror.example.com');
  });

  it('restarts only kubelet when only kubelet configuration changed', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, labels: { 'node.example.com/pool': 'blue' } }));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['restart kubelet']);
    // The drop-in changed, so systemd re-read its units first.
    expect(rig.runner.events.map((e) => e.kind)).toEqual(['daemon-reload', 'service-restart']);
  });

  it("restarts the container once when the node name changed: it is the container's hostname, set when it starts", async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, nodeName: 'node-b' }));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'boot containerd', 'boot kubelet']);
    const slot = path.join(rig.root, 'var/lib/nodegraph/containers/kube1');
    expect(JSON.parse(readFileSync(path.join(slot, 'config.json'), 'utf8')).hostname).toBe('node-b');
    expect(readFileSync(path.join(slot, 'rootfs/etc/systemd/system/kubelet.service.d/10-nodegraph.conf'), 'utf8')).toContain('--hostname-override=node-b');
  });

  it('restarts the container once when sharedRoot changed: / is made rshared as it starts', async () => {
    rig = makeRig({ sharedRoot: true });
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, sharedRoot: false }));
    expect(ok(await rig.plan()).plan.entries().find((e) => e.id === 'kube1/container')).toMatchObject({ action: 'update', verb: 'restart' });
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'boot containerd', 'boot kubelet']);
    expect(rig.runner.commands().filter((c) => c.includes('--make-rshared'))).toEqual([]);
  });

  it('restarts containerd first when both changed', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, clusterDNS: ['10.96.0.11'], registryMirrors: {} }));
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['restart containerd', 'restart kubelet']);
    // The mirror that is no longer configured is gone.
    expect(existsSync(path.join(rig.root, 'etc/containerd/certs.d/docker.io'))).toBe(false);
  });

  it('restarts the container once, and the services come up with it, not restarted, when the bundle changed', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, bundle: { annotations: { 'example.com/x': 'y' } } }));
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().find((e) => e.id === 'kube1/container')?.verb).toBe('may restart');
    rig.runner.reset();
    ok(await rig.apply());
    // systemd in the new container starts the enabled services; nodegraph waits for them.
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'boot containerd', 'boot kubelet']);
  });

  it('unpacks a new image and restarts the container, leaving the services to start with it', async () => {
    rig = makeRig();
    ok(await rig.apply());
    const { makeImage } = await import('../../support/node/graph-rig.ts');
    const image = makeImage(rig.dir, 'image2.tar.gz', 'two');
    rig.writeConfig((c) => ({ ...c, image }));
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.ran).toContain('kube1/rootfs');
    // The new rootfs has no service enabled yet: they are enabled and started.
    expect(story(rig.runner.events)).toEqual(['container-stop kube1', 'container-start kube1', 'start containerd', 'start kubelet']);
    const slot = path.join(rig.root, 'var/lib/nodegraph/containers/kube1');
    expect(readFileSync(path.join(slot, 'rootfs/etc/os-release'), 'utf8')).toContain('BUILD=two');
    // Configuration written into the old rootfs was written again into the new one.
    expect(existsSync(path.join(slot, 'rootfs/etc/containerd/config.toml'))).toBe(true);
    // The old rootfs stayed until the container had restarted, and went then.
    expect(existsSync(path.join(slot, 'rootfs.old'))).toBe(false);
  });

  it('starts a container that stopped behind its back (drift), and its services with it', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.runner.containers.delete('kube1');
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().find((e) => e.id === 'kube1/container')).toMatchObject({ action: 'drift', verb: 'restart' });
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual(['container-start kube1', 'boot containerd', 'boot kubelet']);
  });

  it('destroys services before the container, slots before shared data, the runtime and then the host folders last', async () => {
    rig = makeRig();
    const empty = describeTree(rig.root);
    ok(await rig.apply());
    rig.runner.reset();
    const result = ok(await rig.destroy());
    expect(result.failed).toEqual([]);
    const order = result.order.map(String);
    const before = (a: string, b: string) => expect(order.indexOf(a), `${a} before ${b}`).toBeLessThan(order.indexOf(b));
    before('kube1/kubelet', 'kube1/containerd');
    before('kube1/containerd', 'kube1/container');
    before('kube1/container', 'kube1/rootfs');
    before('kube1/container', 'kube1/bundle');
    before('kube1/kubelet.config', 'host/kubelet-dir');
    before('kube1/rootfs', 'host/layout');
    before('kube1/containerd.config', 'host/certs.d');
    before('host/kubelet-dir', 'host/runtime');
    before('host/layout', 'host/runtime');
    expect(order.slice(-2)).toEqual(['host/runtime', 'host/folders']);
    expect(story(rig.runner.events)).toEqual(['stop kubelet', 'stop containerd', 'container-stop kube1']);
    expect(rig.runner.containers.size).toBe(0);
    // Nothing nodegraph made is left below the root prefix, not even an empty folder.
    expect(describeTree(rig.root)).toEqual(empty);
    // Pod mounts are unmounted before the kubelet directory is removed.
    const kubelet = path.join(rig.root, 'var/lib/kubelet');
    const kinds = rig.runner.events.map((e) => (e.kind === 'unmount-below' || e.kind === 'remove' ? `${e.kind} ${path.relative(rig.root, e.path)}` : undefined)).filter(Boolean);
    expect(kinds.indexOf(`unmount-below ${path.relative(rig.root, kubelet)}`)).toBeLessThan(kinds.indexOf(`remove ${path.relative(rig.root, kubelet)}`));
    for (const p of ['var/lib/kubelet', 'var/lib/nodegraph', 'opt/cni', 'etc/containerd', 'run/containerd', 'usr/local/libexec/nodegraph']) {
      expect(existsSync(path.join(rig.root, p)), p).toBe(false);
    }
    // And nothing is found in place: status has no trace, destroy --traces nothing to do.
    const traced = ok(await teardownNodefile({ nodefile: NODEFILE, stateDir: path.join(rig.dir, 'state'), runner: rig.runner, mode: 'destroy', traces: true }));
    expect(traced.order).toEqual([]);
  });

  it('tears down a node whose state was lost: destroy --traces finds what the tasks manage and removes it all; without it, nothing', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rmSync(path.join(rig.dir, 'state'), { recursive: true, force: true });
    rig.runner.reset();
    // Without --traces the state records nothing, and nothing is touched.
    expect(ok(await rig.destroy()).order).toEqual([]);
    expect(rig.runner.containers.size).toBe(1);
    const result = ok(await teardownNodefile({ nodefile: NODEFILE, stateDir: path.join(rig.dir, 'state'), runner: rig.runner, mode: 'destroy', traces: true }));
    expect(result.failed).toEqual([]);
    expect(result.order.map(String)).toEqual(expect.arrayContaining(['kube1/kubelet', 'kube1/containerd', 'kube1/container', 'kube1/rootfs', 'host/layout', 'host/runtime']));
    expect(story(rig.runner.events)).toEqual(['stop kubelet', 'stop containerd', 'container-stop kube1']);
    expect(rig.runner.containers.size).toBe(0);
    for (const p of ['var/lib/kubelet', 'var/lib/nodegraph', 'opt/cni', 'etc/containerd', 'run/containerd', 'usr/local/libexec/nodegraph']) {
      expect(existsSync(path.join(rig.root, p)), p).toBe(false);
    }
  });

  it('keeps the host folders that were there before it, and what is in them; removes those it made', async () => {
    rig = makeRig({ imageArchiveDir: '/srv/archives' });
    for (const d of ['var/lib/kubelet', 'sys/fs/bpf', 'etc/modules-load.d', 'srv/archives']) mkdirSync(path.join(rig.root, d), { recursive: true });
    writeFileSync(path.join(rig.root, 'var/lib/kubelet/operator.txt'), 'the operator\'s own\n');
    const before = describeTree(rig.root);
    ok(await rig.apply());
    const ledger = readFileSync(path.join(rig.root, 'var/lib/nodegraph/host-folders'), 'utf8');
    for (const d of ['var/lib/kubelet', 'sys/fs/bpf', 'etc/modules-load.d', 'srv/archives']) expect(ledger).toContain(`found ${path.join(rig.root, d)}\n`);
    expect(ledger).toContain(`made ${path.join(rig.root, 'opt/cni/bin')}\n`);
    const result = ok(await rig.destroy());
    expect(result.failed).toEqual([]);
    // The kubelet folder was there: kept with what the node left in it (its config), and the operator's file.
    const left = Object.keys(describeTree(rig.root)).filter((p) => !(p in before));
    expect(left.every((p) => p.startsWith('var/lib/kubelet/')), left.join('\n')).toBe(true);
    expect(readFileSync(path.join(rig.root, 'var/lib/kubelet/operator.txt'), 'utf8')).toBe("the operator's own\n");
    for (const p of Object.keys(before)) expect(existsSync(path.join(rig.root, p)), p).toBe(true);
  });

  it('says clearly when NODEGRAPH_NODE_CONFIG is not set', async () => {
    rig = makeRig();
    delete process.env['NODEGRAPH_NODE_CONFIG'];
    const result = await rig.plan();
    expect(result.ok).toBe(false);
    expect(JSON.stringify(!result.ok && result.error)).toContain('NODEGRAPH_NODE_CONFIG is not set');
  });

  it('stops a slot\'s container by its id before its folder goes, whatever its task\'s record says', async () => {
    rig = makeRig();
    ok(await rig.apply());
    ok(await rig.stop());
    const slot = path.join(rig.root, 'var/lib/nodegraph/containers/kube1');
    // The container runs again though its task is recorded stopped (a run cut short right after runc run).
    await rig.runner.run(['runc', 'run', '--detach', '--bundle', slot, 'kube1'], { cwd: rig.dir });
    expect(rig.runner.containers.get('kube1')?.status).toBe('running');
    rig.runner.reset();
    const destroyed = ok(await teardownNodefile({ nodefile: NODEFILE, stateDir: path.join(rig.dir, 'state'), runner: rig.runner, mode: 'destroy', targets: ['kube1/*'] }));
    expect(destroyed.failed).toEqual([]);
    expect(rig.runner.containers.has('kube1')).toBe(false);
    expect(existsSync(slot)).toBe(false);
    const events = rig.runner.events.map((e) => e.kind);
    expect(events.indexOf('container-delete')).toBeLessThan(events.indexOf('remove'));
  });

  it('removes the rootfs.new an unpack cut short left: the plan says so, and the next apply removes it without unpacking again', async () => {
    rig = makeRig();
    ok(await rig.apply());
    const rootfs = path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs');
    mkdirSync(path.join(`${rootfs}.new`, 'usr'), { recursive: true });
    const plan = ok(await rig.plan()).plan;
    const entry = plan.entries().find((e) => String(e.id) === 'kube1/rootfs')!;
    expect(`${entry.verb} (${entry.reasons.join('; ')})`).toBe(`unpack (check failed: ${rootfs}.new is left from an unpack cut short)`);
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.ran.map(String)).toEqual(['kube1/rootfs']);
    expect(rig.runner.commands().filter((l) => l.startsWith('tar'))).toEqual([]);
    expect(existsSync(`${rootfs}.new`)).toBe(false);
    expect(existsSync(path.join(rootfs, 'sbin/init'))).toBe(true);
    expect(ok(await rig.plan()).plan.entries().filter((e) => e.action !== 'unchanged')).toEqual([]);
  });
});
