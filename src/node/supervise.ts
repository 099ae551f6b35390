// Who keeps the node container alive. On a host that runs systemd: an
// agent-owned unit (`nodegraph-<slot>.service`) running `runc run` in the
// foreground — systemd restarts it and stops it in order at shutdown. On a
// host without systemd: `runc run --detach`, with the console to a log file.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { tryExec, type Exec } from './exec.ts';
import { renderFile } from './render.ts';
import { runcArgv, runDetached, runsCurrentBundle, stopContainer, type RuncOptions, type StopOptions } from './runc.ts';
import { onHost, services } from './services.ts';
import { execLine, renderUnit } from './systemd.ts';

export type Supervisor = 'systemd' | 'runc';

export interface ContainerSpec {
  readonly id: string;
  readonly runc: RuncOptions;
  /** Host path of the bundle directory (config.json and rootfs). */
  readonly bundle: string;
  /** Host path of the console log for a detached container. */
  readonly consoleLog: string;
  readonly stopTimeoutSeconds: number;
}

export const unitName = (id: string): string => `nodegraph-${id}.service`;
export const unitPath = (id: string): string => `/etc/systemd/system/${unitName(id)}`;

export function containerUnit(c: ContainerSpec): string {
  return renderUnit(
    {
      Unit: {
        Description: `nodegraph node container ${c.id}`,
        Wants: 'network-online.target',
        After: 'network-online.target',
      },
      Service: {
        Type: 'simple',
        ExecStartPre: `-${execLine(runcArgv(c.runc, 'delete', '--force', c.id))}`,
        ExecStart: execLine(runcArgv(c.runc, 'run', '--bundle', c.bundle, c.id)),
        ExecStopPost: `-${execLine(runcArgv(c.runc, 'delete', '--force', c.id))}`,
        // runc passes signals on to the container's init; systemd halts on SIGRTMIN+3.
        KillSignal: `SIGRTMIN+3`,
        KillMode: 'mixed',
        TimeoutStopSec: c.stopTimeoutSeconds,
        Delegate: true,
        Restart: 'on-failure',
        RestartSec: 5,
      },
      Install: { WantedBy: 'multi-user.target' },
    },
    'Written by nodegraph; edits are replaced on the next apply.',
  );
}

/**
 * Starts the container unless it already runs as asked: from this bundle,
 * created after its files and the way it is run last changed — one that an
 * apply cut short (a kill -9 right after `runc run`) started. `restart`
 * restarts it whatever it finds. Says which it did.
 */
export async function startContainer(
  exec: Exec,
  supervisor: Supervisor,
  c: ContainerSpec,
  bundleFiles: readonly string[],
  o: { readonly restart: boolean; readonly stop: StopOptions; readonly how?: Readonly<Record<string, boolean | string>> },
): Promise<'started' | 'kept'> {
  // How it is run, beside the bundle: a container created before this last changed was run another way.
  const how = path.join(c.bundle, 'run.json');
  await stopRunAnotherWay(exec, readRun(how), supervisor, c, o.stop);
  renderFile(how, `${JSON.stringify({ supervisor, id: c.id, runc: c.runc, consoleLog: c.consoleLog, ...o.how })}\n`);
  if (!o.restart && (await runsCurrentBundle(exec, c.runc, c.id, c.bundle, [...bundleFiles, how])) === true) return 'kept';
  await restartContainer(exec, supervisor, c, o.stop);
  return 'started';
}

interface RunRecord {
  readonly supervisor: Supervisor;
  readonly id: string;
  readonly runc: RuncOptions;
}

function readRun(file: string): RunRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(file, 'utf8')) as Partial<RunRecord>;
    return typeof r.id === 'string' && typeof r.runc?.binary === 'string' && (r.supervisor === 'systemd' || r.supervisor === 'runc') ? (r as RunRecord) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The container this bundle last ran as, when that was another container id, runc state folder or
 * supervisor: its unit disabled and the container stopped by what it was, else it would run on (and
 * start at boot) beside the new one, from the same rootfs.
 */
async function stopRunAnotherWay(exec: Exec, before: RunRecord | undefined, supervisor: Supervisor, c: ContainerSpec, stop: StopOptions): Promise<void> {
  if (before === undefined) return;
  const elsewhere = before.id !== c.id || before.runc.stateRoot !== c.runc.stateRoot;
  if (before.supervisor === 'systemd' && (elsewhere || supervisor !== 'systemd')) {
    // Stopped first, or it would run the old container again (Restart=on-failure).
    await tryExec(exec, ['systemctl', 'stop', unitName(before.id)]);
    if (supervisor !== 'systemd' || before.id !== c.id) await tryExec(exec, ['systemctl', 'disable', unitName(before.id)]);
  }
  // The binary configured now: the one the record names may have been replaced.
  if (elsewhere) await stopContainer(exec, { ...before.runc, binary: c.runc.binary }, before.id, stop);
}

/** Starts the container, stopping it first if it runs. */
export async function restartContainer(exec: Exec, supervisor: Supervisor, c: ContainerSpec, stop: StopOptions): Promise<void> {
  if (supervisor === 'systemd') {
    const host = services(exec, onHost);
    await host.daemonReload();
    await host.enable(unitName(c.id));
    await host.restart(unitName(c.id));
    return;
  }
  await stopContainer(exec, c.runc, c.id, stop);
  await runDetached(exec, c.runc, c.bundle, c.id, c.consoleLog);
}
