// The middle of a blue/green slot switch: once the new slot is built beside
// the old (rootfs, bundle, unit), the old slot stops — kubelet, containerd,
// then the container; its files and rootfs stay, so a rollback starts it again
// in place — the host networking it left is cleaned, and the kubelet identity
// shared at /var/lib/kubelet goes with the old slot (kept in its folder): the
// new slot gets back its own, kept when it last ran, or bootstraps anew.
//
// Whether those resets are due follows from the switch marker (switch.ts), not
// from what runs when the task runs: a run cut short after the old slot
// stopped still owes them, and a run after they were done owes none. The
// task's check is "no other slot's container is there, and no switch to this
// slot owes its resets", so a slot that takes over again (a rollback, a roll
// forward, a run that continues a switch cut short) runs it again.

import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { execOf, tryExec, type Exec } from './exec.ts';
import type { Helper } from './helper.ts';
import { containerState, type ContainerState, type RuncOptions } from './runc.ts';
import { unitName, type Supervisor } from './supervise.ts';
import { readSwitch, writeSwitch, type SwitchUnderWay } from './switch.ts';
import { failpoint } from '../util/failpoint.ts';

/** A slot as the takeover sees it: its name, its container's id, and where its kubelet identity is kept while it does not run. */
export interface SlotPlace {
  readonly slot: string;
  readonly containerId: string;
  readonly identityDir: string;
}

export interface TakeoverSpec {
  /** The slot that takes over. */
  readonly self: SlotPlace;
  /** The other slots, which must not run beside it. */
  readonly others: readonly SlotPlace[];
  /** The switch marker (switch.ts). */
  readonly marker: string;
  readonly runc: RuncOptions;
  readonly helper: Helper;
  readonly supervisor: Supervisor;
  readonly stopTimeoutSeconds: number;
  /** The shared kubelet folder, as a host path. */
  readonly kubeletDir: string;
  /** The kubeconfig kubelet wrote after its TLS bootstrap (none when nodegraph writes it). */
  readonly bootstrappedKubeconfig?: string | undefined;
  /** With host networking: the CNI bridge the old slot made on the host, and its host-local IPAM folder. */
  readonly hostNetwork?: { readonly bridge: string; readonly ipamDir: string } | undefined;
  /** Built, but not yet started: what must be in place before the old slot stops. */
  readonly after: readonly TaskRef[];
  /** The slots a switch is under way from as the graph loads: the plan says "upgrade from" them. */
  readonly running: readonly string[];
}

/** The client credentials kubelet wrote for itself (TLS bootstrap), by name in its pki folder. */
export const KUBELET_CREDENTIALS = /^kubelet-(client|server)(-.*)?\.(pem|crt|key)$/;

export function takeoverTask(ng: NodefileApi, spec: TakeoverSpec): TaskRef {
  return ng.task(`${spec.self.slot}/takeover`, {
    description: `${spec.self.slot} takes over: any other slot stopped (kept in place), its host networking cleaned, the kubelet identity swapped for this slot's`,
    inputs: {
      spec: ng.value({
        slot: spec.self.slot,
        others: spec.others.map((o) => o.containerId),
        marker: spec.marker,
        hostNetwork: spec.hostNetwork ?? null,
        kubeconfig: spec.bootstrappedKubeconfig ?? null,
      }),
    },
    after: [...spec.after],
    run: async (ctx) => {
      const exec = execOf(ctx);
      const present = await othersThere(exec, spec);
      const marked = readSwitch(spec.marker);
      let underWay: SwitchUnderWay | undefined = marked?.to === spec.self.slot ? marked : undefined;
      // Written before anything stops: from here on, a run cut short leaves the switch known.
      if (underWay === undefined && present.length > 0) {
        underWay = { from: present.map((p) => p.place.slot), to: spec.self.slot, reset: false };
        writeSwitch(spec.marker, underWay);
      }
      for (const { place, state } of present) await stopSlot(exec, spec, place, state);
      // The crash tests' step between the old slot stopping and the resets.
      failpoint(`stopped:${spec.self.slot}`);
      const stopped = present.map((p) => p.place.slot).join(', ') || 'no other slot';
      if (underWay === undefined || underWay.reset) {
        ctx.log(`stopped ${stopped}; ${underWay === undefined ? 'no switch under way' : "the switch's resets were done already"}`);
        return { slot: spec.self.slot };
      }
      // The identity kubelet ran with belongs to the slot it ran in: kept with it, and this slot's own given back.
      const from = underWay.from;
      const old = spec.others.find((o) => from.includes(o.slot));
      if (old !== undefined) stashIdentity(spec.kubeletDir, spec.bootstrappedKubeconfig, old.identityDir);
      if (spec.hostNetwork !== undefined) await cleanHostNetwork(exec, spec.hostNetwork);
      const reset = resetKubeletCredentials(spec.kubeletDir);
      if (spec.bootstrappedKubeconfig !== undefined && existsSync(spec.bootstrappedKubeconfig)) {
        rmSync(spec.bootstrappedKubeconfig);
        reset.push(spec.bootstrappedKubeconfig);
      }
      const restored = restoreIdentity(spec.kubeletDir, spec.bootstrappedKubeconfig, spec.self.identityDir);
      writeSwitch(spec.marker, { ...underWay, reset: true });
      const identity = restored === 0 ? 'its kubelet bootstraps anew' : `gave back its own kubelet identity (${restored} file${restored === 1 ? '' : 's'})`;
      ctx.log(`switch from ${from.join(', ')}: stopped ${present.length === 0 ? 'nothing (stopped already)' : stopped}; reset ${reset.length} kubelet credential file${reset.length === 1 ? '' : 's'}; ${identity}`);
      return { slot: spec.self.slot };
    },
    // In place: no other slot's container is there, and no switch to this slot owes its resets.
    check: async (ctx) => {
      const present = await othersThere(execOf(ctx), spec);
      if (present.length > 0) return present.map((p) => `${p.place.containerId} is ${p.state.status}`).join(', ');
      const marked = readSwitch(spec.marker);
      return marked?.to !== spec.self.slot || marked.reset || `a switch from ${marked.from.join(', ')} is under way, its resets not done`;
    },
    verbs: upgradeVerbs(spec.running),
  });
}

/** The other slots whose container runc knows (running, or stopped and not yet deleted). */
async function othersThere(exec: Exec, spec: TakeoverSpec): Promise<{ place: SlotPlace; state: ContainerState }[]> {
  const present: { place: SlotPlace; state: ContainerState }[] = [];
  for (const place of spec.others) {
    const state = await containerState(exec, spec.runc, place.containerId);
    if (state.status !== 'absent') present.push({ place, state });
  }
  return present;
}

/** Kubelet, then containerd, then the container: what a node does when it drains its own services. */
async function stopSlot(exec: Exec, spec: TakeoverSpec, place: SlotPlace, state: ContainerState): Promise<void> {
  if (state.status === 'running') {
    for (const service of ['kubelet', 'containerd']) await tryExec(exec, spec.helper.service(spec.runc, place.containerId, 'stop', service));
  }
  if (spec.supervisor === 'systemd') await tryExec(exec, ['systemctl', 'stop', unitName(place.containerId)]);
  await exec(spec.helper.stopContainer(spec.runc, place.containerId, spec.stopTimeoutSeconds));
}

/** The plan's word: a switch away from a running slot is an upgrade, and says from which. */
function upgradeVerbs(running: readonly string[]): { create: string; update: string } {
  const verb = running.length === 0 ? 'take over' : `upgrade from ${running.join(', ')}`;
  return { create: verb, update: verb };
}

/**
 * Which of `ids` runc has a container for, read from its state folder (`<root>/<id>/state.json`)
 * rather than by running runc: loading a graph runs no process.
 */
export function containersThere(runc: RuncOptions, ids: readonly string[]): string[] {
  const root = runc.stateRoot ?? '/run/runc';
  return ids.filter((id) => existsSync(path.join(root, id, 'state.json')));
}

/**
 * The slots a switch to `to` is under way from, as the graph loads: another slot's container is there
 * (read from runc's state folder, not by running runc), or a run cut short left the switch marker.
 */
export function switchingFrom(runc: RuncOptions, marker: string, to: string, others: readonly Pick<SlotPlace, 'slot' | 'containerId'>[]): string[] {
  const underWay = readSwitch(marker);
  return others
    .filter((o) => o.slot !== to && (containersThere(runc, [o.containerId]).length > 0 || (underWay?.to === to && underWay.from.includes(o.slot))))
    .map((o) => o.slot);
}

/** With host networking: the CNI bridge a slot made on the host, deleted, and its host-local IPAM state. */
export async function cleanHostNetwork(exec: Exec, network: { readonly bridge: string; readonly ipamDir: string }): Promise<void> {
  if (existsSync(`/sys/class/net/${network.bridge}`)) await exec(['ip', 'link', 'delete', network.bridge]);
  rmSync(network.ipamDir, { recursive: true, force: true });
}

/** Removes the credentials kubelet bootstrapped (pki/kubelet-client-*, kubelet-server-*, its kubeconfig); says which. */
export function resetKubeletCredentials(kubeletDir: string): string[] {
  const removed: string[] = [];
  const pki = path.join(kubeletDir, 'pki');
  let names: string[] = [];
  try {
    names = readdirSync(pki);
  } catch {
    // no pki yet: nothing to reset
  }
  for (const name of names) {
    if (!KUBELET_CREDENTIALS.test(name)) continue;
    rmSync(path.join(pki, name), { force: true });
    removed.push(path.join(pki, name));
  }
  return removed;
}

/** kubelet's own credentials and the kubeconfig naming them, as they are now: what makes a slot's kubelet the node it was. */
function identityNow(kubeletDir: string, kubeconfig: string | undefined): { from: string; name: string }[] {
  const pki = path.join(kubeletDir, 'pki');
  let names: string[] = [];
  try {
    names = readdirSync(pki);
  } catch {
    // no pki: no identity
  }
  const files = names.filter((n) => KUBELET_CREDENTIALS.test(n)).map((name) => ({ from: path.join(pki, name), name: path.join('pki', name) }));
  if (kubeconfig !== undefined && existsSync(kubeconfig)) files.push({ from: kubeconfig, name: 'kubeconfig' });
  return files;
}

/** Keeps the kubelet identity in `dir` (replacing what was kept there); links stay links. Says how many files. */
export function stashIdentity(kubeletDir: string, kubeconfig: string | undefined, dir: string): number {
  const files = identityNow(kubeletDir, kubeconfig);
  if (files.length === 0) return 0;
  const staging = `${dir}.new`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(path.join(staging, 'pki'), { recursive: true, mode: 0o700 });
  for (const f of files) copyEntry(f.from, path.join(staging, f.name));
  rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
  return files.length;
}

/** Puts the identity kept in `dir` back (after a reset); 0 when none was kept. */
export function restoreIdentity(kubeletDir: string, kubeconfig: string | undefined, dir: string): number {
  let names: string[];
  try {
    names = readdirSync(path.join(dir, 'pki'));
  } catch {
    return 0;
  }
  mkdirSync(path.join(kubeletDir, 'pki'), { recursive: true });
  for (const name of names) copyEntry(path.join(dir, 'pki', name), path.join(kubeletDir, 'pki', name));
  let count = names.length;
  if (kubeconfig !== undefined && existsSync(path.join(dir, 'kubeconfig'))) {
    copyEntry(path.join(dir, 'kubeconfig'), kubeconfig);
    count++;
  }
  return count;
}

/**
 * Copies a file with its mode, or a symlink as a link: kubelet's `-current.pem` names a path as the
 * container sees it, which need not exist on the host.
 */
function copyEntry(from: string, to: string): void {
  const stat = lstatSync(from);
  rmSync(to, { force: true });
  if (stat.isSymbolicLink()) {
    symlinkSync(readlinkSync(from), to);
    return;
  }
  copyFileSync(from, to);
  chmodSync(to, stat.mode & 0o7777);
}
