// A slot running: the container with systemd as PID 1 (and, on a systemd host,
// the unit that keeps it), what the slot's tasks share about it — its id,
// runc, its console log, the timeouts — and where its logs are kept when a
// step fails.

import { existsSync } from 'node:fs';
import type { Command, NodefileApi, TaskContext, TaskRef } from '../nodefile/types.ts';
import { removeTree } from './archive.ts';
import { execOf } from './exec.ts';
import { keepingLogs, type SlotLogs } from './logs.ts';
import { asJson, renderFile } from './render.ts';
import { containerState, execInArgv, isRunning } from './runc.ts';
import { services, systemReady, type ReadyOptions, type SystemdTarget } from './services.ts';
import { containerUnit, startContainer, unitName, type ContainerSpec, type Supervisor } from './supervise.ts';
import { describeWaitFailure } from './wait.ts';

/** In seconds, as the node's configuration gives them. */
export interface SlotTimeouts {
  readonly systemd: number;
  readonly service: number;
  readonly stop: number;
  readonly interval: number;
  readonly healthy: number;
}

/** What a slot's running tasks know of it. */
export interface SlotRun {
  readonly slot: string;
  readonly container: ContainerSpec;
  readonly timeouts: SlotTimeouts;
}

const ms = (seconds: number): number => Math.round(seconds * 1000);

/** systemd inside the slot's container. */
export const systemdOf = (run: SlotRun): SystemdTarget => ({ kind: 'container', runc: run.container.runc, id: run.container.id });

export function readyOptions(run: SlotRun, ctx: Pick<TaskContext, 'signal'>, timeoutSeconds: number): ReadyOptions {
  return { timeoutMs: ms(timeoutSeconds), intervalMs: ms(run.timeouts.interval), signal: ctx.signal };
}

/** Kept under the state folder when a step of the slot fails, before a rollback can tear the slot down. */
export function slotLogs(run: SlotRun, ctx: Pick<TaskContext, 'stateDir'>, units: readonly string[]): Omit<SlotLogs, 'stateDir'> & { stateDir: string | undefined } {
  return { stateDir: ctx.stateDir, slot: run.slot, consoleLog: run.container.consoleLog, systemd: systemdOf(run), units };
}

export interface ContainerTaskSpec {
  readonly run: SlotRun;
  readonly supervisor: Supervisor;
  readonly bundle: TaskRef;
  readonly rootfs: TaskRef;
  /** The rootfs folder: the one a new image replaced (`<rootfs>.old`) goes once the container runs on the new. */
  readonly rootfsDir: string;
  /** The bundle's files a running container must be newer than to be kept (startContainer). */
  readonly bundleFiles: readonly string[];
  /** Make `/` rshared inside once systemd is up (kubelet's mount propagation). */
  readonly sharedRoot: boolean;
  /** Stops the container, by its id and its unit's name. */
  readonly stop: Command;
  readonly after: readonly TaskRef[];
}

export function containerTask(ng: NodefileApi, spec: ContainerTaskSpec): TaskRef {
  const { run, supervisor } = spec;
  const { container, slot } = run;
  return ng.task(`${slot}/container`, {
    description: `the node container ${slot}, with systemd as PID 1`,
    // What the running container is: its bundle, its rootfs, the command that runs it. The unit
    // around that command (its description, stop timeout, dependencies) is only an order edge.
    inputs: {
      bundle: spec.bundle,
      rootfs: spec.rootfs,
      spec: ng.value(asJson({ id: container.id, runc: container.runc, bundle: container.bundle, consoleLog: container.consoleLog, supervisor, ...notShared(spec.sharedRoot) })),
    },
    after: [...spec.after],
    run: (ctx) => startSlotContainer(ctx, spec),
    check: (ctx) => isRunning(execOf(ctx), container.runc, container.id),
    // By the container's id (and its unit's name): whatever became of the slot's folder.
    stop: [spec.stop],
    ...(supervisor === 'systemd' ? { destroy: [['systemctl', 'disable', unitName(container.id)]] } : {}),
    verbs: { create: 'start', update: 'restart' },
  });
}

/**
 * sharedRoot is part of how the container runs: `/` made rshared as it starts is undone only by a
 * restart. Named only when off, the default's container is the one it always was.
 */
const notShared = (sharedRoot: boolean): { sharedRoot?: false } => (sharedRoot ? {} : { sharedRoot: false });

/** Starts (or restarts, or keeps) the container and waits for systemd in it; its creation time and pid. */
async function startSlotContainer(ctx: TaskContext, spec: ContainerTaskSpec): Promise<{ started: string; pid: number }> {
  const { run, supervisor } = spec;
  const { container, slot, timeouts } = run;
  const exec = execOf(ctx);
  const stop = { timeoutMs: ms(timeouts.stop), intervalMs: ms(timeouts.interval), signal: ctx.signal };
  await keepingLogs(exec, slotLogs(run, ctx, []), async () => {
    const started = await startContainer(exec, supervisor, container, spec.bundleFiles, { restart: ctx.forced, stop, how: notShared(spec.sharedRoot) });
    if (started === 'kept') ctx.log(`${container.id} already runs from this bundle (an apply cut short started it): not restarted`);
    const up = await systemReady(services(exec, systemdOf(run)), `systemd in ${slot}`, readyOptions(run, ctx, timeouts.systemd));
    if (!up.ok) throw new Error(describeWaitFailure(up.error));
  });
  if (spec.sharedRoot) await exec(execInArgv(container.runc, container.id, ['mount', '--make-rshared', '/']));
  removeTree(`${spec.rootfsDir}.old`);
  const state = await containerState(exec, container.runc, container.id);
  // A new value each start: the services below learn that the container was (re)started.
  return { started: state.status === 'absent' ? '' : state.created, pid: state.status === 'absent' ? 0 : state.pid };
}

export interface UnitTaskSpec {
  readonly slot: string;
  readonly container: ContainerSpec;
  /** The unit file, as a host path. */
  readonly file: string;
  /** Removes the unit (and reloads systemd) on destroy. */
  readonly remove: Command;
  readonly after: readonly TaskRef[];
}

/** On a systemd host: the unit that runs the container, written and reloaded; the running container is not touched. */
export function unitTask(ng: NodefileApi, spec: UnitTaskSpec): TaskRef {
  const text = containerUnit(spec.container);
  return ng.task(`${spec.slot}/unit`, {
    description: `the systemd unit that keeps ${spec.slot} running`,
    inputs: { unit: ng.value(text) },
    outputs: [spec.file],
    after: [...spec.after],
    run: async (ctx) => {
      renderFile(spec.file, text);
      await services(execOf(ctx), { kind: 'host' }).daemonReload();
    },
    check: () => existsSync(spec.file) || `${spec.file} is missing`,
    destroy: [spec.remove],
    // A rewritten unit is read by systemd now and used at the container's next start: the container keeps running.
    verbs: { create: 'write', update: 'reload' },
  });
}
