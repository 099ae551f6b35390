// What an operator reads after a slot failed, kept where a rollback does not
// reach: the slot's console log and the journal of its failed units, copied
// under the state folder (`<state>/logs/<slot>-<time>/`) before the slot can
// be torn down — its journal lives in the container's /run and its console
// log in the slot's folder, and both go with it. Only the newest few are kept.

import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tryExec, type Exec } from './exec.ts';
import { journalctlArgv, systemctlArgv, type SystemdTarget } from './services.ts';

/** How many failed slots' logs are kept; older ones go. */
export const KEPT_LOGS = 5;
/** How many of a failed unit's journal lines are kept. */
const UNIT_LINES = 300;
/** How many lines of the whole journal (the boot) are kept. */
const BOOT_LINES = 1000;

export interface SlotLogs {
  /** The state folder (ctx.stateDir). */
  readonly stateDir: string;
  readonly slot: string;
  /** Host path of the slot's console log. */
  readonly consoleLog: string;
  /** systemd in the slot's container. */
  readonly systemd: SystemdTarget;
  /** Units to keep the journal of even when systemd does not list them failed (one still restarting). */
  readonly units: readonly string[];
  readonly now?: Date;
}

export const logsDirOf = (stateDir: string): string => path.join(stateDir, 'logs');

/** `<slot>-20261205T121314.123Z`: sorts by time within a slot, and says when. */
const folderName = (slot: string, at: Date): string => `${slot}-${at.toISOString().replace(/[-:]/g, '')}`;
const timeOf = (name: string): string => name.slice(name.lastIndexOf('-') + 1);

/**
 * Copies the slot's console log and, while its container runs, `systemctl --failed`, the status
 * and journal of each failed unit (and of `units`) and the boot's journal into a new folder under
 * `<state>/logs/`; keeps the newest KEPT_LOGS folders. Returns the folder.
 */
export async function keepSlotLogs(exec: Exec, o: SlotLogs): Promise<string> {
  const root = logsDirOf(o.stateDir);
  const dir = path.join(root, folderName(o.slot, o.now ?? new Date()));
  mkdirSync(dir, { recursive: true });
  if (existsSync(o.consoleLog)) copyFileSync(o.consoleLog, path.join(dir, 'console.log'));
  const failed = await tryExec(exec, systemctlArgv(o.systemd, 'list-units', '--failed', '--plain', '--no-legend', '--no-pager'));
  if (failed.exitCode === 0) {
    writeFileSync(path.join(dir, 'failed-units.txt'), failed.stdout);
    const names = failed.stdout.split('\n').map((l) => l.trim().split(/\s+/)[0] ?? '').filter((u) => u !== '');
    const full = (unit: string): string => (unit.includes('.') ? unit : `${unit}.service`);
    for (const unit of new Set([...o.units, ...names].map(full))) {
      const status = await tryExec(exec, systemctlArgv(o.systemd, 'status', '--no-pager', '--full', '--lines=0', unit));
      const journal = await tryExec(exec, journalctlArgv(o.systemd, '--unit', unit, '--lines', String(UNIT_LINES), '--no-pager', '--output=short-iso-precise'));
      writeFileSync(path.join(dir, `${unit}.txt`), `$ systemctl status ${unit}\n${status.stdout}${status.stderr}\n$ journalctl --unit ${unit}\n${journal.stdout}${journal.stderr}`);
    }
    const boot = await tryExec(exec, journalctlArgv(o.systemd, '--boot', '--lines', String(BOOT_LINES), '--no-pager', '--output=short-iso-precise'));
    writeFileSync(path.join(dir, 'journal.txt'), boot.stdout);
  } else {
    writeFileSync(path.join(dir, 'failed-units.txt'), `(systemd in ${o.slot} did not answer: ${failed.stdout}${failed.stderr})\n`);
  }
  pruneLogs(root, KEPT_LOGS);
  return dir;
}

/** Removes all but the newest `keep` folders of kept logs. */
export function pruneLogs(root: string, keep: number): void {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  const oldest = names.sort((a, b) => (timeOf(a) < timeOf(b) ? 1 : timeOf(a) > timeOf(b) ? -1 : 0)).slice(keep);
  for (const name of oldest) rmSync(path.join(root, name), { recursive: true, force: true });
}

/**
 * Runs `body`; if it throws, keeps the slot's logs first and says where in the error. Keeping
 * them is best effort: a failure to keep them is named, and the body's error stays the error.
 */
export async function keepingLogs<T>(exec: Exec, logs: Omit<SlotLogs, 'stateDir'> & { readonly stateDir: string | undefined }, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (logs.stateDir === undefined) throw error;
    let where: string;
    try {
      where = `${logs.slot}'s logs are kept in ${await keepSlotLogs(exec, { ...logs, stateDir: logs.stateDir })}`;
    } catch (failure) {
      where = `${logs.slot}'s logs could not be kept: ${failure instanceof Error ? failure.message : String(failure)}`;
    }
    throw new Error(`${message}\n${where}`);
  }
}
