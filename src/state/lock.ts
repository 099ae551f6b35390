// One writer at a time. `<stateDir>/lock` is created exclusively (O_EXCL) and
// holds who created it. A second run is refused with the holder's details; a
// lock left by a process that died on this host is taken over; a lock from
// another host (a shared state dir) is never taken over automatically —
// `nodegraph unlock` (forceUnlock) is the way out.
//
// Everything here is synchronous: the lock is taken once at startup and
// released once at exit, and synchronous calls cannot interleave.

import { existsSync, readdirSync, readFileSync, renameSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import { pause } from '../util/pause.ts';
import { ensureStateDir, errnoCode, unwritable, type StateDirUnwritable } from './errors.ts';
import { create, holderOf, liveness, ownInfo, parseInfo, read, releaseIfOurs, removeStale, takeLockFile, writtenBeforeBoot, type LockHolder, type LockInfo } from './lock-file.ts';
import { closeRecord, endLeftovers, openRecord, type EndedRun } from './processes.ts';
import { removeOrphanedTransaction } from './transaction-files.ts';

export type { LockHolder, LockInfo } from './lock-file.ts';

// Built-ins by getBuiltinModule rather than import: see cli/main.ts.
const { hostname } = process.getBuiltinModule('node:os');

/**
 * Runs `fn` holding the lock file `path` (the state lock's kind of file: created whole by link,
 * a dead holder's taken over), waiting up to `waitMs` for a live holder to let go; 'busy' when it
 * did not. For a few milliseconds' read-modify-write beside the state lock, which a run refused
 * that lock still needs.
 */
export function withLockFile<T>(path: string, command: string, waitMs: number, fn: () => T): Result<T | 'busy', StateDirUnwritable> {
  const info = ownInfo(command);
  const taken = takeLockFile(path, info, waitMs, 10, removeStale);
  if (!taken.ok) return taken;
  if (taken.value === 'busy') return ok('busy');
  try {
    return ok(fn());
  } finally {
    releaseIfOurs(path, info.token);
  }
}

/** The lock is held by someone else (or its file cannot be understood). */
export interface Locked {
  readonly reason: 'locked';
  /** The lock file. */
  readonly path: string;
  /** The holder, or undefined when the lock file is unreadable (see `unreadable`). */
  readonly holder: LockHolder | undefined;
  /** Why the lock file could not be understood, and what it held; present iff holder is undefined. */
  readonly unreadable?: { readonly message: string; readonly content: string };
  /** True when the holder is on another host, so its liveness could not be checked. */
  readonly otherHost: boolean;
}

export type LockError = Locked | StateDirUnwritable;

export type ReleaseOutcome = 'released' | 'not-ours' | 'missing';

export interface Lock {
  readonly stateDir: string;
  readonly path: string;
  readonly info: LockInfo;
  /** The dead holder whose stale lock was taken over, if any — worth telling the user. */
  readonly tookOverFrom: LockHolder | undefined;
  /** An unreadable lock file written before this boot was removed: what it held, and why it could not be read. */
  readonly removedUnreadable?: { readonly message: string; readonly content: string; readonly writtenAt: string } | undefined;
  /** Processes of killed runs that were still running and were ended as the lock was taken (src/state/processes.ts). */
  readonly endedProcesses?: readonly EndedRun[];
  /** A transaction folder without its record (state/transaction-files.ts), removed as the lock was taken. */
  readonly removedTransaction?: string | undefined;
  /** Whether the lock file on disk is still this lock (someone may have forced it). */
  isHeld(): boolean;
  /** Removes the lock file if it is still ours; never removes someone else's. */
  release(): Result<ReleaseOutcome, StateDirUnwritable>;
}

export interface AcquireOptions {
  /** Recorded as the holder's command; defaults to process.argv joined. */
  readonly command?: string;
}

export type ForceUnlockOutcome =
  | { readonly removed: false }
  | { readonly removed: true; readonly holder: LockHolder | undefined; readonly content: string };

export const lockPath = (stateDir: string): string => join(resolve(stateDir), 'lock');

function makeLock(
  stateDir: string,
  path: string,
  info: LockInfo,
  tookOverFrom: LockHolder | undefined,
  removedUnreadable: Lock['removedUnreadable'],
  endedProcesses: readonly EndedRun[],
  removedTransaction: string | undefined,
  record: string | undefined,
  madeDir: boolean,
): Lock {
  const isHeld = (): boolean => {
    const seen = read(path);
    return seen.ok && seen.value.kind === 'held' && seen.value.info.token === info.token;
  };
  return {
    stateDir,
    path,
    info,
    tookOverFrom,
    removedUnreadable,
    endedProcesses,
    removedTransaction,
    isHeld,
    release(): Result<ReleaseOutcome, StateDirUnwritable> {
      // The record first: one left behind by a run that ended well would have the next
      // holder end what its finished commands left running, as for a killed run.
      closeRecord(record);
      const released = releaseIfOurs(path, info.token);
      // A state folder this lock made and nothing was kept in goes too: a run that recorded nothing leaves the project as it found it.
      if (madeDir) removeIfEmpty(stateDir);
      return released;
    },
  };
}

function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // not empty (or gone): kept
  }
}

/** Leftover `*lock.stale-*`, `*lock.new-*` and `*lock.takeover.*` files older than a minute are from crashed takeovers and acquisitions. */
function sweepAside(stateDir: string): void {
  try {
    for (const name of readdirSync(stateDir)) {
      if (!/lock\.(stale-|new-|takeover\.)/.test(name)) continue;
      const file = join(stateDir, name);
      if (Date.now() - statSync(file).mtimeMs > 60_000) unlinkSync(file);
    }
  } catch {
    // housekeeping only
  }
}

/**
 * Takes the state lock, creating the state directory if needed.
 * err 'locked' when another live run (or another host, or an unreadable lock
 * file) holds it; err 'state-dir-unwritable' when the directory or lock file
 * cannot be created.
 */
export function acquire(stateDir: string, options: AcquireOptions = {}): Result<Lock, LockError> {
  const dir = resolve(stateDir);
  const madeDir = !existsSync(dir);
  const made = ensureStateDir(dir);
  if (!made.ok) return made;
  const path = join(dir, 'lock');
  const info = ownInfo(options.command ?? process.argv.join(' '));
  let tookOverFrom: LockHolder | undefined;
  let removedUnreadable: Lock['removedUnreadable'];
  let last: Locked | undefined;
  // Each round either creates the lock, reports a live holder, or removes a
  // stale lock (which cannot happen forever: every removal is of a dead
  // holder's lock). The bound only guards against pathological churn.
  for (let round = 0; round < 8; round++) {
    const created = create(path, info);
    if (!created.ok) {
      // The folder was removed meanwhile by a holder that had made it and kept nothing in it (release): make it again.
      if (created.error.code !== 'ENOENT') return created;
      const again = ensureStateDir(dir);
      if (!again.ok) return again;
      continue;
    }
    if (created.value === 'created') {
      sweepAside(dir);
      // Before anything else the new holder does: no process of a killed run acts on the machine any more.
      const ended = endLeftovers(dir, info.token, liveness);
      // Then the half-made work of a killed run that no record refers to.
      const removedTransaction = removeOrphanedTransaction(dir);
      const record = openRecord(dir, info);
      return ok(makeLock(dir, path, info, tookOverFrom, removedUnreadable, ended, removedTransaction, record, madeDir));
    }
    const seen = read(path);
    if (!seen.ok) return seen;
    const s = seen.value;
    if (s.kind === 'missing') continue; // released meanwhile: try again
    if (s.kind === 'unreadable') {
      // A power loss can leave a lock empty or torn (it is not synced: see create). Written
      // before this boot, no process that is running can hold it.
      if (writtenBeforeBoot(s.mtimeMs)) {
        const removed = removeStale(path, s);
        if (!removed.ok) return removed;
        if (removed.value === 'removed') removedUnreadable = { message: s.message, content: s.content, writtenAt: new Date(s.mtimeMs).toISOString() };
        continue;
      }
      // Possibly a lock being written this very instant; look once more.
      last = { reason: 'locked', path, holder: undefined, unreadable: { message: s.message, content: s.content }, otherHost: false };
      if (round === 0) {
        pause(25);
        continue;
      }
      return err(last);
    }
    const state = liveness(s.info);
    if (state !== 'dead') return err({ reason: 'locked', path, holder: holderOf(s.info), otherHost: state === 'other-host' });
    const removed = removeStale(path, s);
    if (!removed.ok) return removed;
    if (removed.value === 'removed') tookOverFrom = holderOf(s.info);
    last = { reason: 'locked', path, holder: holderOf(s.info), otherHost: false };
  }
  return err(last ?? { reason: 'locked', path, holder: undefined, otherHost: false });
}

/**
 * Removes the lock whoever holds it and says exactly what it removed: the
 * file is renamed aside first, so the content returned is the lock that was
 * removed, even if it changed in between.
 */
export function breakLock(stateDir: string): Result<ForceUnlockOutcome, StateDirUnwritable> {
  const path = lockPath(stateDir);
  const aside = `${path}.stale-${randomId()}`;
  try {
    renameSync(path, aside);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok({ removed: false });
    return err(unwritable(path, e));
  }
  let content = '';
  try {
    content = readFileSync(aside, 'utf8');
  } catch {
    // removed anyway; report no holder
  }
  try {
    unlinkSync(aside);
  } catch {
    // a leftover .stale-* file is harmless and swept later
  }
  const info = parseInfo(content);
  return ok({ removed: true, holder: typeof info === 'string' ? undefined : holderOf(info), content });
}

/**
 * For `nodegraph unlock`: removes the lock and returns the holder it
 * removed, or undefined when there was no lock. A lock file that could not
 * be parsed is still removed; it comes back as a holder with pid 0, host
 * 'unknown' and a command that quotes the file, so the user is told
 * something was removed.
 */
export function forceUnlock(stateDir: string): Result<LockHolder | undefined, StateDirUnwritable> {
  const removed = breakLock(stateDir);
  if (!removed.ok) return removed;
  const r = removed.value;
  if (!r.removed) return ok(undefined);
  if (r.holder !== undefined) return ok(r.holder);
  const content = r.content.length > 80 ? `${r.content.slice(0, 80)}…` : r.content;
  return ok({ pid: 0, host: 'unknown', command: `unreadable lock file: ${JSON.stringify(content)}`, startedAt: 'unknown' });
}

/** The holder of the lock when it is a process alive on this host (so no lock to break by hand), else undefined. */
export function liveHolder(stateDir: string): LockHolder | undefined {
  const seen = read(lockPath(stateDir));
  if (!seen.ok || seen.value.kind !== 'held') return undefined;
  return liveness(seen.value.info) === 'alive' ? holderOf(seen.value.info) : undefined;
}

/**
 * Who holds the lock while that run may still be going: a live process on this
 * host, or any holder on another host (whose processes cannot be seen from
 * here). Undefined when there is no lock, or its holder is gone or unreadable.
 */
export function runningHolder(stateDir: string): (LockHolder & { readonly otherHost: boolean }) | undefined {
  const seen = read(lockPath(stateDir));
  if (!seen.ok || seen.value.kind !== 'held') return undefined;
  const state = liveness(seen.value.info);
  return state === 'dead' ? undefined : { ...holderOf(seen.value.info), otherHost: state === 'other-host' };
}

/** Reads the lock without touching it, e.g. for `nodegraph status`. */
export function readLock(stateDir: string): Result<Locked | undefined, StateDirUnwritable> {
  const path = lockPath(stateDir);
  const seen = read(path);
  if (!seen.ok) return seen;
  const s = seen.value;
  if (s.kind === 'missing') return ok(undefined);
  if (s.kind === 'unreadable') {
    return ok({ reason: 'locked', path, holder: undefined, unreadable: { message: s.message, content: s.content }, otherHost: false });
  }
  return ok({ reason: 'locked', path, holder: holderOf(s.info), otherHost: s.info.host !== hostname() });
}

/** The lock, for a run inside the holder's: closing that run's state does not release it. */
export function borrow(lock: Lock): Lock {
  return {
    stateDir: lock.stateDir,
    path: lock.path,
    info: lock.info,
    tookOverFrom: undefined,
    isHeld: () => lock.isHeld(),
    release: () => ok('released'),
  };
}
