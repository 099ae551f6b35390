// One writer at a time. `<stateDir>/lock` is created exclusively (O_EXCL) and
// holds who created it. A second run is refused with the holder's details; a
// lock left by a process that died on this host is taken over; a lock from
// another host (a shared state dir) is never taken over automatically —
// `nodegraph unlock` (forceUnlock) is the way out.
//
// Everything here is synchronous: the lock is taken once at startup and
// released once at exit, and synchronous calls cannot interleave.

import {
  closeSync,
  fstatSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import { ensureStateDir, errnoCode, errnoMessage, unwritable, type StateDirUnwritable } from './errors.ts';
import { closeRecord, endLeftovers, openRecord, procStat, type EndedRun } from './processes.ts';
import { removeOrphanedTransaction } from './transaction-files.ts';

// Built-ins by getBuiltinModule rather than import: see cli/main.ts.
const { hostname } = process.getBuiltinModule('node:os');

/** Who holds the lock; the same shape as LockHolder in src/error.ts. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  readonly command: string;
  readonly startedAt: string;
}

/** What the lock file holds: the holder, plus what tells one lock from another. */
export interface LockInfo extends LockHolder {
  /** Random per acquisition: a lock is "ours" only if it carries our token. */
  readonly token: string;
  /** Linux boot id when known: a lock from an earlier boot is stale whatever its pid. */
  readonly bootId?: string;
  /**
   * When the holder process started (Linux: clock ticks since boot, /proc/<pid>/stat's
   * 22nd field): a process now under that pid that started at another time is another
   * process, so the lock is stale. Pids are reused, and a nodegraph that is pid 1 of a
   * container has the same pid in every container it runs in.
   */
  readonly pidStart?: number;
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

let cachedBootId: string | undefined | null = null;
function bootId(): string | undefined {
  if (cachedBootId === null) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
    } catch {
      cachedBootId = undefined;
    }
  }
  return cachedBootId;
}

type Seen =
  | { readonly kind: 'missing' }
  | {
      readonly kind: 'unreadable';
      readonly content: string;
      readonly message: string;
      readonly dev: number;
      readonly ino: number;
      readonly mtimeMs: number;
    }
  | {
      readonly kind: 'held';
      readonly info: LockInfo;
      readonly content: string;
      readonly dev: number;
      readonly ino: number;
    };

function parseInfo(content: string): LockInfo | string {
  let value: unknown;
  try {
    value = JSON.parse(content);
  } catch (e) {
    return content === '' ? 'the lock file is empty' : `the lock file is not JSON: ${errnoMessage(e)}`;
  }
  if (typeof value !== 'object' || value === null) return 'the lock file does not hold an object';
  const v = value as Record<string, unknown>;
  const { pid, host, command, startedAt, token, bootId: boot, pidStart } = v;
  // pid 0 and negative pids address process groups in kill(); never accept them.
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return 'the lock file has no valid pid';
  if (typeof host !== 'string' || typeof command !== 'string' || typeof startedAt !== 'string') {
    return 'the lock file lacks host, command or startedAt';
  }
  // A lock without a token (written by hand or another tool) is understood
  // but can never be "ours": every lock this module writes has one.
  return {
    pid,
    host,
    command,
    startedAt,
    token: typeof token === 'string' ? token : '',
    ...(typeof boot === 'string' ? { bootId: boot } : {}),
    ...(typeof pidStart === 'number' && Number.isSafeInteger(pidStart) ? { pidStart } : {}),
  };
}

function read(path: string): Result<Seen, StateDirUnwritable> {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok({ kind: 'missing' });
    return err(unwritable(path, e));
  }
  try {
    // Read through the fd so the identity (dev, ino) belongs to the content read.
    const st = fstatSync(fd);
    const content = readFileSync(fd, 'utf8');
    const info = parseInfo(content);
    if (typeof info === 'string') return ok({ kind: 'unreadable', content, message: info, dev: st.dev, ino: st.ino, mtimeMs: st.mtimeMs });
    return ok({ kind: 'held', info, content, dev: st.dev, ino: st.ino });
  } catch (e) {
    return err(unwritable(path, e));
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether a file modified at `mtimeMs` was written before this host booted
 * (Linux: /proc/stat's btime, in seconds). False when that cannot be told.
 */
function writtenBeforeBoot(mtimeMs: number): boolean {
  let btime: number;
  try {
    btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'))?.[1]);
  } catch {
    return false;
  }
  // A second's margin: btime is rounded to whole seconds.
  return Number.isFinite(btime) && btime > 0 && mtimeMs < (btime - 1) * 1000;
}

const pause = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

const holderOf = (info: LockInfo): LockHolder => ({
  pid: info.pid,
  host: info.host,
  command: info.command,
  startedAt: info.startedAt,
});

/** 'dead' only when we are sure: same host, and (another boot, or no such process, or a zombie). */
function liveness(info: LockInfo): 'alive' | 'dead' | 'other-host' {
  if (info.host !== hostname()) return 'other-host';
  const boot = bootId();
  if (info.bootId !== undefined && boot !== undefined && info.bootId !== boot) return 'dead';
  // Our own pid, or a live one: the same process only if it started when the lock says.
  const stat = procStat(info.pid);
  if (info.pidStart !== undefined && stat?.start !== undefined && stat.start !== info.pidStart) return 'dead';
  if (info.pid === process.pid) return 'alive';
  try {
    process.kill(info.pid, 0);
  } catch (e) {
    // EPERM: the process exists but belongs to someone else — alive.
    return errnoCode(e) === 'ESRCH' ? 'dead' : 'alive';
  }
  // A zombie has exited and only waits for its parent to collect its status: kill(pid, 0)
  // still finds it, but it runs no code and holds no file. A run killed with -9 whose
  // parent (a script, a supervisor) has not reaped it yet left a lock as stale as any.
  return stat?.state === 'Z' || stat?.state === 'X' ? 'dead' : 'alive';
}

/**
 * Creates the lock file exclusively, already holding our info: the info is
 * written to a file of our own, which link() then puts in place. link() fails
 * if the lock exists, and a lock never exists half-written, so a run that
 * finds it always learns who holds it (an O_EXCL create followed by a write
 * left an empty file for a moment, which a racing run read as an unreadable
 * lock).
 *
 * Not synced: a lock only matters while its holder runs, and a power loss ends
 * that. The empty or torn lock it can leave was written before the next boot,
 * and acquire removes such a lock (writtenBeforeBoot). An fsync here cost every
 * run, a no-op too, 0.6 ms on an idle disk and tens on a busy one.
 */
function create(path: string, info: LockInfo): Result<'created' | 'exists', StateDirUnwritable> {
  const own = `${path}.new-${info.token}`;
  try {
    const fd = openSync(own, 'w', 0o644);
    try {
      writeSync(fd, `${JSON.stringify(info)}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    removeQuietly(own);
    return err(unwritable(path, e));
  }
  try {
    linkSync(own, path);
    return ok('created');
  } catch (e) {
    if (errnoCode(e) === 'EEXIST') return ok('exists');
    return err(unwritable(path, e));
  } finally {
    removeQuietly(own);
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // a leftover lock.* file is swept by a later run (sweepAside)
  }
}

/**
 * Removes the stale lock we judged dead, and only that one.
 *
 * Without flock() there is no atomic "delete this file if it is still the
 * one I looked at". Two runs may both judge the same lock stale; a plain
 * unlink() by the slower one could then delete the lock the faster one has
 * just created, and both would run. Instead the lock is moved aside with
 * rename() (atomic: exactly one mover gets any given file) and what was moved
 * is then checked: same inode and byte-identical content (the token makes
 * every lock's content unique, which also covers inode-number reuse) as the
 * lock judged stale. If we moved someone else's fresh lock instead, it is put
 * back with link(), which cannot overwrite a lock created meanwhile.
 *
 * The residual window: if a third run creates a lock in the microseconds
 * between our mistaken move and the put-back, the put-back fails and the
 * run whose lock we moved keeps running while the third one also runs. That
 * needs three runs racing on a stale lock within microseconds; the moved lock
 * is left at `<lock>.stale-*` for inspection, and its owner's release() /
 * isHeld() report it as no longer held.
 */
function removeStale(path: string, stale: Exclude<Seen, { kind: 'missing' }>): Result<'removed' | 'changed', StateDirUnwritable> {
  const aside = `${path}.stale-${randomId()}`;
  try {
    const st = statSync(path);
    if (st.dev !== stale.dev || st.ino !== stale.ino) return ok('changed');
    renameSync(path, aside);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok('changed');
    return err(unwritable(path, e));
  }
  const moved = read(aside);
  if (
    moved.ok &&
    moved.value.kind === stale.kind &&
    moved.value.dev === stale.dev &&
    moved.value.ino === stale.ino &&
    moved.value.content === stale.content
  ) {
    try {
      unlinkSync(aside);
    } catch {
      // a leftover .stale-* file is harmless
    }
    return ok('removed');
  }
  // Not the stale lock: put it back, never over a lock created meanwhile.
  try {
    linkSync(aside, path);
    unlinkSync(aside);
  } catch {
    // see the residual window above
  }
  return ok('changed');
}

function makeLock(
  stateDir: string,
  path: string,
  info: LockInfo,
  tookOverFrom: LockHolder | undefined,
  removedUnreadable: Lock['removedUnreadable'],
  endedProcesses: readonly EndedRun[],
  removedTransaction: string | undefined,
  record: string | undefined,
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
      const seen = read(path);
      if (!seen.ok) return seen;
      if (seen.value.kind === 'missing') return ok('missing');
      if (seen.value.kind !== 'held' || seen.value.info.token !== info.token) return ok('not-ours');
      // Between the check and the unlink only a forced unlock plus a new
      // acquire could swap the file; a live holder is never taken over.
      try {
        unlinkSync(path);
        return ok('released');
      } catch (e) {
        if (errnoCode(e) === 'ENOENT') return ok('missing');
        return err(unwritable(path, e));
      }
    },
  };
}

/** Leftover `lock.stale-*` and `lock.new-*` files older than a minute are from crashed takeovers and acquisitions. */
function sweepAside(stateDir: string): void {
  try {
    for (const name of readdirSync(stateDir)) {
      if (!name.startsWith('lock.stale-') && !name.startsWith('lock.new-')) continue;
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
  const made = ensureStateDir(dir);
  if (!made.ok) return made;
  const path = join(dir, 'lock');
  const boot = bootId();
  const ownStart = procStat(process.pid)?.start;
  const info: LockInfo = {
    pid: process.pid,
    host: hostname(),
    command: options.command ?? process.argv.join(' '),
    startedAt: new Date().toISOString(),
    token: randomId(),
    ...(boot === undefined ? {} : { bootId: boot }),
    ...(ownStart === undefined ? {} : { pidStart: ownStart }),
  };
  let tookOverFrom: LockHolder | undefined;
  let removedUnreadable: Lock['removedUnreadable'];
  let last: Locked | undefined;
  // Each round either creates the lock, reports a live holder, or removes a
  // stale lock (which cannot happen forever: every removal is of a dead
  // holder's lock). The bound only guards against pathological churn.
  for (let round = 0; round < 8; round++) {
    const created = create(path, info);
    if (!created.ok) return created;
    if (created.value === 'created') {
      sweepAside(dir);
      // Before anything else the new holder does: no process of a killed run acts on the machine any more.
      const ended = endLeftovers(dir, info.token, liveness);
      // Then the half-made work of a killed run that no record refers to.
      const removedTransaction = removeOrphanedTransaction(dir);
      const record = openRecord(dir, info);
      return ok(makeLock(dir, path, info, tookOverFrom, removedUnreadable, ended, removedTransaction, record));
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
