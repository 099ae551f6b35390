// The middle of a blue/green slot switch: once the new slot is built beside
// the old (rootfs, bundle, unit), the old slot stops — kubelet, containerd,
// then the container; its files and rootfs stay, so a rollback starts it again
// in place — the host networking it left is cleaned, and the kubelet's client
// credentials shared at /var/lib/kubelet are reset, so the new kubelet
// bootstraps its own. The same task on a fresh host finds nothing to stop, and resets nothing.

import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { execOf, tryExec, type Exec } from './exec.ts';
import type { Helper } from './helper.ts';
import { containerState, parseState, runcArgv, type RuncOptions } from './runc.ts';
import { unitName, type Supervisor } from './supervise.ts';

export interface TakeoverSpec {
  /** The slot that takes over. */
  readonly slot: string;
  /** The container ids of the other slots, which must not run beside it. */
  readonly others: readonly string[];
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
  /** The other slots running as the graph loads (runningOf): a switch from them is an upgrade, and the plan says so. */
  readonly running: readonly string[];
}

/** The client credentials kubelet wrote for itself (TLS bootstrap), by name in its pki folder. */
export const KUBELET_CREDENTIALS = /^kubelet-(client|server)(-.*)?\.(pem|crt|key)$/;

export function takeoverTask(ng: NodefileApi, spec: TakeoverSpec): TaskRef {
  return ng.task(`${spec.slot}/takeover`, {
    description: `${spec.slot} takes over: any other slot stopped (kept in place), its host networking cleaned, kubelet's credentials reset`,
    inputs: { spec: ng.value({ slot: spec.slot, others: [...spec.others], hostNetwork: spec.hostNetwork ?? null, kubeconfig: spec.bootstrappedKubeconfig ?? null }) },
    after: [...spec.after],
    run: async (ctx) => {
      const exec = execOf(ctx);
      const stopped: string[] = [];
      for (const other of spec.others) {
        const state = await containerState(exec, spec.runc, other);
        if (state.status === 'absent') continue;
        if (state.status === 'running') {
          // Kubelet first, then containerd: what a node does when it drains its own services.
          for (const service of ['kubelet', 'containerd']) await tryExec(exec, spec.helper.service(spec.runc, other, 'stop', service));
        }
        if (spec.supervisor === 'systemd') await tryExec(exec, ['systemctl', 'stop', unitName(other)]);
        await exec(spec.helper.stopContainer(spec.runc, other, spec.stopTimeoutSeconds));
        stopped.push(other);
      }
      // Only a slot taken over from another cleans what it left and resets kubelet's identity: run again
      // on a node it already runs (a changed definition, a rollback), it leaves the running one's alone.
      if (stopped.length > 0 && spec.hostNetwork !== undefined) await cleanHostNetwork(exec, spec.hostNetwork);
      const reset = stopped.length === 0 ? [] : resetKubeletCredentials(spec.kubeletDir);
      if (stopped.length > 0 && spec.bootstrappedKubeconfig !== undefined && existsSync(spec.bootstrappedKubeconfig)) {
        rmSync(spec.bootstrappedKubeconfig);
        reset.push(spec.bootstrappedKubeconfig);
      }
      ctx.log(`stopped ${stopped.length === 0 ? 'no other slot' : stopped.join(', ')}; reset ${reset.length} kubelet credential file${reset.length === 1 ? '' : 's'}`);
      return { slot: spec.slot };
    },
    verbs: upgradeVerbs(spec.running),
  });
}

/** The plan's word: a switch away from a running slot is an upgrade, and says from which. */
function upgradeVerbs(running: readonly string[]): { create: string; update: string } {
  const verb = running.length === 0 ? 'take over' : `upgrade from ${running.join(', ')}`;
  return { create: verb, update: verb };
}

/** Which of `ids` runc reports running now (read when the graph loads: is this apply a slot switch?). */
export function runningOf(runc: RuncOptions, ids: readonly string[]): string[] {
  return ids.filter((id) => {
    const [binary, ...args] = runcArgv(runc, 'state', id);
    const result = spawnSync(binary!, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 });
    return result.status === 0 && parseState(result.stdout)?.status === 'running';
  });
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
