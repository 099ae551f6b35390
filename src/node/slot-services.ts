// containerd and kubelet in a slot's container, and the task that says the
// slot answers — the node's health. A service whose container was (re)started
// in the same apply is waited for (systemd starts it at boot once enabled),
// never restarted; otherwise it is started or restarted, and waited for.

import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { ok } from '../util/result.ts';
import { CTR_VERSION } from './containerd.ts';
import { execOf, lastLine, tryExec, type Exec } from './exec.ts';
import type { Helper } from './helper.ts';
import { keepingLogs, keepSlotLogs } from './logs.ts';
import { execInArgv } from './runc.ts';
import { bringUp, serviceAction, services, systemReady, waitActive, type ReadyOptions } from './services.ts';
import { readyOptions, slotLogs, systemdOf, type SlotRun } from './slot-run.ts';
import { clearSwitch } from './switch.ts';
import { describeWaitFailure, waitFor } from './wait.ts';

export interface ServiceTaskSpec {
  readonly run: SlotRun;
  readonly name: 'containerd' | 'kubelet';
  /** The slot's container task: a new value means it was (re)started. */
  readonly container: TaskRef;
  /** What else restarts it (its configuration, its binary). */
  readonly inputs: Readonly<Record<string, TaskRef>>;
  readonly after: readonly TaskRef[];
  /** Reload systemd before a restart: the unit's drop-in may have changed. */
  readonly reload: boolean;
  readonly helper: Helper;
}

export function serviceTask(ng: NodefileApi, spec: ServiceTaskSpec): TaskRef {
  const { run, name, reload } = spec;
  const { slot } = run;
  const containerId = `${slot}/container`;
  return ng.task(`${slot}/${name}`, {
    description: `${name} running in ${slot}`,
    inputs: { container: spec.container, ...spec.inputs, spec: ng.value({ slot, unit: name, reload }) },
    after: [...spec.after],
    run: async (ctx) => {
      const svc = services(execOf(ctx), systemdOf(run));
      const containerStarted = ctx.ran(containerId);
      const enabled = containerStarted && (await svc.isEnabled(name));
      const action = serviceAction({ containerStarted, firstRun: ctx.firstRun, enabled });
      // A changed drop-in is read only after a reload; a fresh boot has read it already.
      if (reload && !containerStarted) await svc.daemonReload();
      ctx.log(action === 'wait' ? `${name} started with the container: waiting for it` : `${action} ${name}`);
      await keepingLogs(execOf(ctx), slotLogs(run, ctx, [`${name}.service`]), () =>
        bringUp(svc, name, action, `${name} in ${slot}`, readyOptions(run, ctx, run.timeouts.service)),
      );
      // The main pid changes with every (re)start, so what verifies the node follows.
      return { unit: name, mainPid: await svc.mainPid(name) };
    },
    check: async (ctx) => {
      const state = await services(execOf(ctx), systemdOf(run)).activeState(name);
      return state === 'active' || `${name} is ${state}`;
    },
    stop: [spec.helper.service(run.container.runc, run.container.id, 'stop', name)],
    // A (re)started container starts its services with it: the plan says so.
    verbs: { create: 'start', update: 'restart', upstream: { [containerId]: 'start' } },
  });
}

export interface VerifiedTaskSpec {
  readonly run: SlotRun;
  readonly containerd: TaskRef;
  readonly kubelet: TaskRef;
  readonly after: readonly TaskRef[];
  /** The switch marker (switch.ts): cleared once this slot answers. */
  readonly marker: string;
}

const SERVICE_UNITS = ['containerd.service', 'kubelet.service'];

/** The slot answers: systemd running, containerd serving `ctr version`, kubelet active. Its check is the node's health. */
export function verifiedTask(ng: NodefileApi, spec: VerifiedTaskSpec): TaskRef {
  const { run } = spec;
  const { slot, timeouts } = run;
  return ng.task(`${slot}/verified`, {
    description: `${slot} answers: systemd running, containerd serving, kubelet active`,
    inputs: { containerd: spec.containerd, kubelet: spec.kubelet },
    after: [...spec.after],
    run: async (ctx) => {
      const exec = execOf(ctx);
      await keepingLogs(exec, slotLogs(run, ctx, SERVICE_UNITS), () => waitAnswering(exec, run, readyOptions(run, ctx, timeouts.service)));
      // The new slot answers: the switch to it is no longer under way (a rollback would give the marker back).
      if (clearSwitch(spec.marker, slot)) ctx.log(`the switch to ${slot} is done`);
      return { verified: slot };
    },
    check: (ctx) => answers(execOf(ctx), run),
    // The node's health after a change: it must answer within the service timeout and stay so.
    health: {
      within: `${timeouts.service}s`,
      stable: `${timeouts.healthy}s`,
      // Caught only in the health window: keep what an operator will read before the rollback stops the slot.
      onFailure: async (ctx) =>
        ctx.stateDir === undefined ? undefined : `${slot}'s logs are kept in ${await keepSlotLogs(execOf(ctx), { ...slotLogs(run, ctx, SERVICE_UNITS), stateDir: ctx.stateDir })}`,
    },
    verbs: { create: 'verify', update: 'verify' },
  });
}

/** Waits for systemd, then containerd answering, then kubelet active; throws what did not come. */
async function waitAnswering(exec: Exec, run: SlotRun, o: ReadyOptions): Promise<void> {
  const { slot, container } = run;
  const svc = services(exec, systemdOf(run));
  const waits = [
    () => systemReady(svc, `systemd in ${slot}`, o),
    () =>
      waitFor(async () => {
        const r = await tryExec(exec, execInArgv(container.runc, container.id, CTR_VERSION));
        return { ok: r.exitCode === 0, detail: `ctr version: ${lastLine(r) || `exit ${r.exitCode}`}` };
      }, { what: `containerd answering in ${slot}`, ...o }),
    () => waitActive(svc, 'kubelet', `kubelet in ${slot}`, o).then(() => ok(undefined)),
  ];
  for (const wait of waits) {
    const result = await wait();
    if (!result.ok) throw new Error(describeWaitFailure(result.error));
  }
}

/** The check: true, or the first of systemd, containerd, kubelet that does not answer. */
async function answers(exec: Exec, run: SlotRun): Promise<true | string> {
  const { slot, container } = run;
  const svc = services(exec, systemdOf(run));
  const system = await svc.systemState();
  if (system !== 'running' && system !== 'degraded') return `systemd in ${slot} is ${system}`;
  const ctr = await tryExec(exec, execInArgv(container.runc, container.id, CTR_VERSION));
  if (ctr.exitCode !== 0) return `ctr version failed in ${slot}: ${lastLine(ctr)}`;
  const kubeletState = await svc.activeState('kubelet');
  return kubeletState === 'active' || `kubelet in ${slot} is ${kubeletState}`;
}
