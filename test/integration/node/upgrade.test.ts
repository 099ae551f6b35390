// The blue/green slot switch with the fake runner: the new slot is built while
// the old one runs, the old one stops only then (kept in place), kubelet's
// bootstrapped credentials are reset, and the old slot is retired only once
// the new one is healthy; a new slot that does not come up is undone — the
// old slot runs again on its untouched rootfs, the shared files as they were.

import { existsSync, mkdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EngineEvent } from '../../../src/events.ts';
import { describeTree } from '../../support/tree.ts';
import { makeRig, ok, type Rig } from '../../support/node/graph-rig.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

const slotDir = (slot: string): string => path.join(rig.root, 'var/lib/nodegraph/containers', slot);

/** kubelet's identity after its TLS bootstrap, a CNI binary, as a node has them. */
/** A switch from kube1 to kube2 cut short after it wrote its marker and stopped kube1: the marker's path. */
function switchCutShort(): string {
  const marker = path.join(rig.root, 'var/lib/nodegraph/containers/switch.json');
  writeFileSync(marker, `${JSON.stringify({ from: ['kube1'], to: 'kube2', reset: false })}\n`);
  rig.runner.containers.delete('kube1');
  rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
  return marker;
}

function bootstrapped(): void {
  mkdirSync(path.join(rig.root, 'var/lib/kubelet/pki'), { recursive: true });
  writeFileSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-client-current.pem'), 'identity of node-a\n');
  // As kubelet links it: a path as the container sees it, which the host need not have.
  symlinkSync('/var/lib/kubelet/pki/kubelet-server-2026-12-05.pem', path.join(rig.root, 'var/lib/kubelet/pki/kubelet-server-current.pem'));
  writeFileSync(path.join(rig.root, 'var/lib/kubelet/kubeconfig'), 'apiVersion: v1\n');
  mkdirSync(path.join(rig.root, 'opt/cni/bin'), { recursive: true });
  writeFileSync(path.join(rig.root, 'opt/cni/bin/bridge'), 'ELF\n');
}

const shared = (): Record<string, string> => ({
  ...Object.fromEntries(Object.entries(describeTree(path.join(rig.root, 'var/lib/kubelet/pki'))).map(([k, v]) => [`pki/${k}`, v])),
  ...Object.fromEntries(Object.entries(describeTree(path.join(rig.root, 'opt/cni'))).map(([k, v]) => [`cni/${k}`, v])),
  ...Object.fromEntries(Object.entries(describeTree(path.join(rig.root, 'etc/containerd/certs.d'))).map(([k, v]) => [`certs.d/${k}`, v])),
});

describe('switching the running slot (blue/green)', () => {
  it('builds the new slot while the old one runs, stops the old one only then, resets kubelet credentials, and retires the old slot once healthy', async () => {
    rig = makeRig();
    ok(await rig.apply());
    bootstrapped();
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    const rootfs = statSync(path.join(slotDir('kube1'), 'rootfs')).ino;

    const plan = ok(await rig.plan()).plan;
    const entry = (id: string): string | undefined => plan.entries().find((e) => e.id === id)?.verb;
    expect(entry('kube2/takeover')).toBe('upgrade from kube1');
    expect(entry('kube2/rootfs')).toBe('unpack');
    expect(entry('kube1/container')).toBe('stop');

    // What had happened to kube1 when kube2's bundle was written: nothing.
    let whenBuilt: string[] | undefined;
    const push = rig.events.push.bind(rig.events);
    rig.events.push = (...events: EngineEvent[]) => {
      for (const e of events) if (e.type === 'task-done' && e.id === 'kube2/bundle') whenBuilt = rig.runner.events.map((f) => `${f.kind} ${'id' in f ? f.id : ''}`);
      return push(...events);
    };
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.failed).toEqual([]);
    expect(whenBuilt?.filter((f) => f.includes('kube1'))).toEqual([]);
    const order = rig.runner.events.filter((e) => e.kind === 'container-stop' || e.kind === 'container-start').map((e) => `${e.kind} ${'id' in e ? e.id : ''}`);
    expect(order.slice(0, 2)).toEqual(['container-stop kube1', 'container-start kube2']);
    expect([...rig.runner.containers].filter(([, c]) => c.status === 'running').map(([id]) => id)).toEqual(['kube2']);
    // kube1 is kept prepared, on the same rootfs; its running tasks are stopped in place, its kubelet identity kept with it.
    expect(statSync(path.join(slotDir('kube1'), 'rootfs')).ino).toBe(rootfs);
    expect(summary.stopped).toEqual(expect.arrayContaining(['kube1/container', 'kube1/containerd', 'kube1/kubelet']));
    expect(describeTree(path.join(slotDir('kube1'), 'identity'))).toMatchObject({ 'pki/kubelet-client-current.pem': expect.any(String), kubeconfig: expect.any(String) });
    expect(existsSync(path.join(rig.root, 'var/lib/nodegraph/containers/switch.json')), 'the switch is done').toBe(false);
    expect(ok(await rig.plan()).plan.entries().filter((e) => e.action !== 'unchanged').map((e) => String(e.id))).toEqual([]);
    // The new kubelet bootstraps afresh: the old client credentials and kubeconfig are gone, the CNI binaries stay.
    expect(Object.keys(describeTree(path.join(rig.root, 'var/lib/kubelet/pki')))).not.toContain('kubelet-client-current.pem');
    expect(describeTree(path.join(rig.root, 'var/lib/kubelet'))['kubeconfig']).toBeUndefined();
    expect(describeTree(path.join(rig.root, 'opt/cni'))['bin/bridge']).toBeDefined();
  });

  it('with host networking, cleans the CNI host-local IPAM state the old slot left', async () => {
    rig = makeRig({ hostNetwork: true });
    ok(await rig.apply());
    const ipam = path.join(rig.root, 'var/lib/cni/networks', rig.config.cni === false ? '' : (rig.config.cni?.name ?? 'nodegraph'));
    mkdirSync(ipam, { recursive: true });
    writeFileSync(path.join(ipam, '10.244.0.2'), 'pod-of-kube1\n');
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    expect(ok(await rig.apply()).failed).toEqual([]);
    expect(existsSync(ipam)).toBe(false);
  });

  it("undoes a switch whose new kubelet never comes up: kube2 removed, kube1 running again on its own rootfs, shared files byte for byte", async () => {
    rig = makeRig();
    ok(await rig.apply());
    bootstrapped();
    const before = shared();
    const rootfs = statSync(path.join(slotDir('kube1'), 'rootfs')).ino;
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    // kube2's kubelet fails as soon as it is started.
    const run = rig.runner.run.bind(rig.runner);
    rig.runner.run = async (command, options) => {
      const result = await run(command, options);
      const kubelet = rig.runner.containers.get('kube2')?.services.get('kubelet');
      if (kubelet !== undefined) kubelet.active = false;
      return result;
    };
    const result = await rig.apply();
    expect(result.ok).toBe(false);
    const failure = !result.ok && result.error.at(-1);
    expect(failure).toMatchObject({ reason: 'atomic-apply-failed', cause: 'kube2/kubelet failed', rolledBack: true, from: 1, to: 2 });
    expect([...rig.runner.containers].filter(([, c]) => c.status === 'running').map(([id]) => id)).toEqual(['kube1']);
    expect(rig.runner.containers.has('kube2')).toBe(false);
    expect(statSync(path.join(slotDir('kube1'), 'rootfs')).ino).toBe(rootfs);
    expect(shared()).toEqual(before);
    const node = JSON.parse(await import('node:fs').then((fs) => fs.readFileSync(rig.configFile, 'utf8'))) as { slot: string };
    expect(node.slot).toBe('kube1');
    expect(ok(await rig.plan()).plan.counts.unchanged).toBe(ok(await rig.plan()).plan.size);
  });

  it('freezes the old slot during a switch: a bundle change reaches the new slot only, and the old one when it is prepared again', async () => {
    rig = makeRig();
    ok(await rig.apply());
    const configJson = path.join(slotDir('kube1'), 'config.json');
    const before = { ino: statSync(configJson).ino, text: readFileSync(configJson, 'utf8') };
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'], bundle: { ...c.bundle, annotations: { changed: 'during the switch' } } }));
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().filter((e) => String(e.id).startsWith('kube1/') && e.action !== 'destroy').map((e) => String(e.id))).toEqual([]);
    let seen: { ino: number; text: string } | undefined;
    const push = rig.events.push.bind(rig.events);
    rig.events.push = (...events: EngineEvent[]) => {
      for (const e of events) if (e.type === 'task-done' && e.id === 'kube2/verified') seen = { ino: statSync(configJson).ino, text: readFileSync(configJson, 'utf8') };
      return push(...events);
    };
    const summary = ok(await rig.apply());
    expect(summary.ran.map(String).filter((id) => id.startsWith('kube1/'))).toEqual([]);
    expect(seen, 'kube1 untouched until kube2 answered').toEqual(before);
    expect({ ino: statSync(configJson).ino, text: readFileSync(configJson, 'utf8') }, 'and when the switch committed').toEqual(before);
    expect(readFileSync(path.join(slotDir('kube2'), 'config.json'), 'utf8')).toContain('during the switch');
    // The switch done, kube1 is a prepared slot again: the change reaches it now, while it does not run.
    const next = ok(await rig.apply());
    expect(next.ran.map(String)).toEqual(['kube1/bundle']);
    expect(readFileSync(configJson, 'utf8')).toContain('during the switch');
  });

  it('owes the resets of a switch cut short after the old slot stopped, and does them once', async () => {
    rig = makeRig();
    ok(await rig.apply());
    bootstrapped();
    // A run cut short: it wrote the marker and stopped kube1, and no more.
    const marker = switchCutShort();
    const plan = ok(await rig.plan()).plan;
    expect(plan.entries().find((e) => String(e.id) === 'kube2/takeover')?.verb, 'still a switch from kube1').toBe('upgrade from kube1');
    ok(await rig.apply());
    expect(Object.keys(describeTree(path.join(rig.root, 'var/lib/kubelet/pki')))).not.toContain('kubelet-client-current.pem');
    expect(readFileSync(path.join(slotDir('kube1'), 'identity/pki/kubelet-client-current.pem'), 'utf8')).toBe('identity of node-a\n');
    expect(existsSync(marker)).toBe(false);

    // Cut short after the resets: kube2's kubelet has bootstrapped its own identity, which stays.
    ok(await rig.apply());
    writeFileSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-client-current.pem'), 'identity of kube2\n');
    writeFileSync(marker, `${JSON.stringify({ from: ['kube1'], to: 'kube2', reset: true })}\n`);
    ok(await rig.apply({ replace: ['kube2/takeover'] }));
    expect(readFileSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-client-current.pem'), 'utf8')).toBe('identity of kube2\n');
  });

  it('gives a slot that takes over again its own kubelet identity back, and keeps the other\'s with it', async () => {
    rig = makeRig();
    ok(await rig.apply());
    bootstrapped();
    const identity = (): string => readFileSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-client-current.pem'), 'utf8');
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    ok(await rig.apply());
    // kube2's kubelet bootstraps.
    writeFileSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-client-current.pem'), 'identity of kube2\n');
    const kube2Rootfs = statSync(path.join(slotDir('kube2'), 'rootfs')).ino;
    rig.writeConfig((c) => ({ ...c, slot: 'kube1', prepare: [] }));
    const back = ok(await rig.apply());
    expect(back.ran.map(String)).not.toContain('kube1/rootfs');
    expect(identity()).toBe('identity of node-a\n');
    expect(readlinkSync(path.join(rig.root, 'var/lib/kubelet/pki/kubelet-server-current.pem'))).toBe('/var/lib/kubelet/pki/kubelet-server-2026-12-05.pem');
    // kube2, no longer declared, is stopped in place with its identity; forward again, it is found there.
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    rig.runner.reset();
    rig.events.length = 0;
    const forward = ok(await rig.apply());
    const at = (type: string, id: string): number => rig.events.findIndex((e) => e.type === type && 'id' in e && e.id === id);
    expect(at('task-done', 'kube2/takeover'), 'the takeover is done before the container starts').toBeLessThan(at('task-start', 'kube2/container'));
    expect(at('task-done', 'kube2/takeover')).toBeGreaterThanOrEqual(0);
    expect(forward.ran.map(String)).not.toContain('kube2/rootfs');
    // Its configuration in place, nothing of kube2 runs before its container but the takeover: kube1 stops first.
    const order = rig.runner.events.filter((e) => e.kind === 'container-stop' || e.kind === 'container-start').map((e) => `${e.kind} ${'id' in e ? e.id : ''}`);
    expect(order).toEqual(['container-stop kube1', 'container-start kube2']);
    expect(statSync(path.join(slotDir('kube2'), 'rootfs')).ino).toBe(kube2Rootfs);
    expect(identity()).toBe('identity of kube2\n');
  });

  it('runs the takeover of a slot kept in place again when a switch to it was cut short before its resets', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, slot: 'kube2', prepare: ['kube1'] }));
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, slot: 'kube1', prepare: ['kube2'] }));
    ok(await rig.apply());
    bootstrapped();
    // Back to kube2, whose takeover has a record: a run cut short wrote the marker and stopped kube1.
    const marker = switchCutShort();
    const entry = ok(await rig.plan()).plan.entries().find((e) => String(e.id) === 'kube2/takeover');
    expect(entry?.reasons).toEqual(['check failed: a switch from kube1 is under way, its resets not done']);
    const summary = ok(await rig.apply());
    expect(summary.ran.map(String)).toContain('kube2/takeover');
    expect(readFileSync(path.join(slotDir('kube1'), 'identity/pki/kubelet-client-current.pem'), 'utf8')).toBe('identity of node-a\n');
    expect(existsSync(marker)).toBe(false);
  });
});
