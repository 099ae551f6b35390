// systemd services, inside the node container (systemctl through `runc
// exec`) or on the host (plain systemctl): start, restart, reload, stop,
// is-active, MainPID, and a wait for systemd itself to be up.

import type { Argv } from '../nodefile/types.ts';
import { lastLine, tryExec, type Exec } from './exec.ts';
import { execInArgv, type RuncOptions } from './runc.ts';
import { describeWaitFailure, waitFor, type Clock, type WaitTimeout } from './wait.ts';
import type { Result } from '../util/result.ts';

/** Where systemctl runs: the host, or a runc container. */
export type SystemdTarget = { readonly kind: 'host' } | { readonly kind: 'container'; readonly runc: RuncOptions; readonly id: string };

export const onHost: SystemdTarget = { kind: 'host' };

export function systemctlArgv(target: SystemdTarget, ...args: string[]): Argv {
  const argv = ['systemctl', ...args];
  return target.kind === 'host' ? argv : execInArgv(target.runc, target.id, argv);
}

export interface Services {
  start(unit: string): Promise<void>;
  restart(unit: string): Promise<void>;
  reload(unit: string): Promise<void>;
  stop(unit: string): Promise<void>;
  enable(unit: string): Promise<void>;
  /** Enables the unit, so systemd starts it at boot, and starts it now. */
  enableNow(unit: string): Promise<void>;
  /** `systemctl is-enabled`: will systemd start it at boot? */
  isEnabled(unit: string): Promise<boolean>;
  disable(unit: string): Promise<void>;
  daemonReload(): Promise<void>;
  /** `systemctl is-active`: the word it prints (active, inactive, failed, activating, …). */
  activeState(unit: string): Promise<string>;
  /** The service's main process id; 0 when it has none. */
  mainPid(unit: string): Promise<number>;
  /** What systemd holds of the unit now: its states, restart counter and main pid. */
  unitState(unit: string): Promise<UnitState>;
  /** `systemctl is-system-running`: running, degraded, starting, … or what went wrong. */
  systemState(): Promise<string>;
  /** What an operator reads when a unit did not come up: `systemctl status` and its last journal lines. */
  report(unit: string): Promise<string>;
}

/** How many of a unit's journal lines a failure shows. */
const REPORT_LINES = 10;

export function journalctlArgv(target: SystemdTarget, ...args: string[]): Argv {
  const argv = ['journalctl', ...args];
  return target.kind === 'host' ? argv : execInArgv(target.runc, target.id, argv);
}

export function services(exec: Exec, target: SystemdTarget): Services {
  const run = async (...args: string[]): Promise<void> => {
    await exec(systemctlArgv(target, ...args));
  };
  return {
    start: (unit) => run('start', unit),
    restart: (unit) => run('restart', unit),
    reload: (unit) => run('reload', unit),
    stop: (unit) => run('stop', unit),
    enable: (unit) => run('enable', unit),
    enableNow: (unit) => run('enable', '--now', unit),
    isEnabled: async (unit) => (await tryExec(exec, systemctlArgv(target, 'is-enabled', unit))).exitCode === 0,
    disable: (unit) => run('disable', unit),
    daemonReload: () => run('daemon-reload'),
    activeState: async (unit) => {
      const r = await tryExec(exec, systemctlArgv(target, 'is-active', unit));
      return r.stdout.trim() || lastLine(r) || `exit ${r.exitCode}`;
    },
    mainPid: async (unit) => {
      const r = await exec(systemctlArgv(target, 'show', '--property=MainPID', '--value', unit));
      const pid = Number.parseInt(r.stdout.trim(), 10);
      return Number.isFinite(pid) ? pid : 0;
    },
    unitState: async (unit) => {
      const r = await exec(systemctlArgv(target, 'show', `--property=${UNIT_PROPERTIES.join(',')}`, unit));
      return parseUnitState(r.stdout);
    },
    systemState: async () => {
      const r = await tryExec(exec, systemctlArgv(target, 'is-system-running'));
      return r.stdout.trim() || lastLine(r) || `exit ${r.exitCode}`;
    },
    report: async (unit) => {
      // status exits non-zero for a unit that is not active: its text is the point.
      const status = await tryExec(exec, systemctlArgv(target, 'status', '--no-pager', '--full', '--lines=0', unit));
      const journal = await tryExec(exec, journalctlArgv(target, '--unit', unit, '--lines', String(REPORT_LINES), '--no-pager', '--no-hostname'));
      const text = (r: { stdout: string; stderr: string }): string =>
        (r.stdout.trim() || r.stderr.trim() || '(nothing)').split('\n').map((l) => `  ${l.trimEnd()}`).join('\n');
      return `systemctl status ${unit}:\n${text(status)}\njournalctl --unit ${unit} (last ${REPORT_LINES} lines):\n${text(journal)}`;
    },
  };
}

/** A unit as `systemctl show` tells it. */
export interface UnitState {
  /** active, activating, failed, inactive, … */
  readonly active: string;
  /** running, auto-restart, failed, dead, start, … */
  readonly sub: string;
  /** How often systemd restarted it by itself (Restart=). */
  readonly restarts: number;
  readonly mainPid: number;
  /** success, exit-code, signal, … (the last run's) */
  readonly result: string;
}

const UNIT_PROPERTIES = ['ActiveState', 'SubState', 'NRestarts', 'MainPID', 'Result'] as const;

export function parseUnitState(stdout: string): UnitState {
  const values = new Map(stdout.split('\n').flatMap((line) => {
    const at = line.indexOf('=');
    return at < 0 ? [] : [[line.slice(0, at), line.slice(at + 1).trim()] as const];
  }));
  const number = (key: string): number => {
    const n = Number.parseInt(values.get(key) ?? '', 10);
    return Number.isFinite(n) ? n : 0;
  };
  return {
    active: values.get('ActiveState') || 'unknown',
    sub: values.get('SubState') || 'unknown',
    restarts: number('NRestarts'),
    mainPid: number('MainPID'),
    result: values.get('Result') || 'unknown',
  };
}

export type Settling = 'up' | 'waiting' | 'failing';

/**
 * Where a unit is on its way up, from what the wait saw first, the probe
 * before and now. Up: active, running, and the same process with no restart
 * since the probe before (a Type=simple unit is "active" for the moment
 * between fork and a failed exec). Failing: failed, waiting to be restarted
 * after a failure, or restarted by systemd since the wait began — a unit with
 * Restart=always that never settles would otherwise look like progress.
 */
export function settling(first: UnitState, previous: UnitState | undefined, now: UnitState): Settling {
  if (now.active === 'failed' || now.sub === 'auto-restart' || now.restarts > first.restarts) return 'failing';
  const steady = previous !== undefined && previous.active === 'active' && previous.mainPid === now.mainPid && previous.restarts === now.restarts;
  return now.active === 'active' && now.sub === 'running' && steady ? 'up' : 'waiting';
}

export function describeUnitState(unit: string, s: UnitState): string {
  const restarts = s.restarts === 1 ? '1 restart' : `${s.restarts} restarts`;
  return `${unit} is ${s.active} (${s.sub}); last result ${s.result}, ${restarts} by systemd`;
}

export interface ReadyOptions {
  readonly timeoutMs: number;
  readonly intervalMs: number;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
}

const waitOptions = (what: string, o: ReadyOptions) => ({
  what,
  timeoutMs: o.timeoutMs,
  intervalMs: o.intervalMs,
  ...(o.clock === undefined ? {} : { clock: o.clock }),
  ...(o.signal === undefined ? {} : { signal: o.signal }),
});

/** systemd has finished booting: `running`, or `degraded` (a unit failed, but the manager is up). */
export function systemReady(s: Services, what: string, o: ReadyOptions): Promise<Result<unknown, WaitTimeout>> {
  return waitFor(async () => {
    const state = await s.systemState();
    return { ok: state === 'running' || state === 'degraded', detail: `is-system-running: ${state}` };
  }, waitOptions(what, o));
}

/** Waits for the unit to be up and steady (see settling); one seen failing ends the wait at once. */
export function unitActive(s: Services, unit: string, what: string, o: ReadyOptions): Promise<Result<unknown, WaitTimeout>> {
  let first: UnitState | undefined;
  let previous: UnitState | undefined;
  return waitFor(async () => {
    const now = await s.unitState(unit);
    first ??= now;
    const verdict = settling(first, previous, now);
    previous = now;
    return { ok: verdict === 'up', hopeless: verdict === 'failing', detail: describeUnitState(unit, now) };
  }, waitOptions(what, o));
}

/** Waits for the unit to be up; if it is not, throws with the wait's words, its status and its journal. */
export async function waitActive(s: Services, unit: string, what: string, o: ReadyOptions): Promise<void> {
  const active = await unitActive(s, unit, what, o);
  if (!active.ok) throw new Error(`${describeWaitFailure(active.error)}\n${await s.report(unit)}`);
}

/**
 * Brings a service up as `serviceAction` decided (enable and start it,
 * restart it, or only wait for it) and waits for it to be active. A failure
 * says what systemctl or the wait said, then the unit's status and journal.
 */
export async function bringUp(s: Services, unit: string, action: ServiceAction, what: string, o: ReadyOptions): Promise<void> {
  try {
    if (action === 'start') await s.enableNow(unit);
    if (action === 'restart') await s.restart(unit);
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${await s.report(unit)}`);
  }
  await waitActive(s, unit, what, o);
}

export type ServiceAction = 'wait' | 'start' | 'restart';

/**
 * What a service task does when it runs. If this apply (re)started the
 * container, systemd inside has just booted with the new configuration and
 * started the service if it is enabled: wait for it, never restart it. A
 * service not yet enabled (a first run, a new rootfs) is enabled and started.
 * Otherwise its configuration (or its binary) changed, or it drifted: restart it.
 */
export function serviceAction(o: { readonly containerStarted: boolean; readonly firstRun: boolean; readonly enabled: boolean }): ServiceAction {
  if (o.containerStarted && o.enabled) return 'wait';
  return o.containerStarted || o.firstRun ? 'start' : 'restart';
}
