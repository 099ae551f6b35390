// The lock file: what it holds (who created it), reading it, creating it
// exclusively, telling whether its holder still runs, and removing a stale one
// without ever removing another's (lock.ts takes and releases the lock).

import { closeSync, fstatSync, linkSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import { pause } from '../util/pause.ts';
import { errnoCode, errnoMessage, unwritable, type StateDirUnwritable } from './errors.ts';
import { procStat } from './processes.ts';

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

let cachedBootId: string | undefined | null = null;
export function bootId(): string | undefined {
  if (cachedBootId === null) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
    } catch {
      cachedBootId = undefined;
    }
  }
  return cachedBootId;
}

export type Seen =
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

export function parseInfo(content: string): LockInfo | string {
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

export function read(path: string): Result<Seen, StateDirUnwritable> {
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
export function writtenBeforeBoot(mtimeMs: number): boolean {
  let btime: number;
  try {
    btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'))?.[1]);
  } catch {
    return false;
  }
  // A second's margin: btime is rounded to whole seconds.
  return Number.isFinite(btime) && btime > 0 && mtimeMs < (btime - 1) * 1000;
}

export const holderOf = (info: LockInfo): LockHolder => ({
  pid: info.pid,
  host: info.host,
  command: info.command,
  startedAt: info.startedAt,
});

/** 'dead' only when we are sure: same host, and (another boot, or no such process, or a zombie). */
export function liveness(info: LockInfo): 'alive' | 'dead' | 'other-host' {
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
export function create(path: string, info: LockInfo): Result<'created' | 'exists', StateDirUnwritable> {
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

export function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // a leftover lock.* file is swept by a later run (sweepAside)
  }
}

/** How long a remover waits for the one whose turn it is: a turn lasts a read and an unlink. */
const TURN_WAIT_MS = 2000;

/** This process as a lock's holder, with a token of this acquisition's own. */
export function ownInfo(command: string): LockInfo {
  const boot = bootId();
  const ownStart = procStat(process.pid)?.start;
  return {
    pid: process.pid,
    host: hostname(),
    command,
    startedAt: new Date().toISOString(),
    token: randomId(),
    ...(boot === undefined ? {} : { bootId: boot }),
    ...(ownStart === undefined ? {} : { pidStart: ownStart }),
  };
}

/**
 * Removes the stale lock we judged dead, and only that one: 'changed' when the
 * lock is no longer the one judged (removed by another run, or another run's
 * fresh lock in its place).
 *
 * Without flock() there is no atomic "delete this file if it is still the one
 * I looked at", and a file's identity cannot stand in for it: ext4 gives the
 * inode of a stale lock just removed to the next lock created. So removers take
 * turns, each holding `<lock>.takeover` (a lock of the same kind) while it
 * compares the lock with the one it judged, byte for byte (the token makes every
 * lock's content unique), and unlinks it if they are equal. While a turn is
 * held only its holder removes a stale lock, a dead holder never releases one,
 * and a live lock is never moved, so nothing changes the file between the
 * comparison and the unlink but `nodegraph unlock`.
 */
export function removeStale(path: string, stale: Exclude<Seen, { kind: 'missing' }>): Result<'removed' | 'changed', StateDirUnwritable> {
  const turn = takeTurn(`${path}.takeover`);
  if (!turn.ok) return turn;
  if (turn.value === 'busy') return ok('changed');
  try {
    const now = read(path);
    if (!now.ok) return now;
    if (now.value.kind !== stale.kind || now.value.content !== stale.content) return ok('changed');
    unlinkSync(path);
    return ok('removed');
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok('changed');
    return err(unwritable(path, e));
  } finally {
    releaseIfOurs(`${path}.takeover`, turn.value.token);
  }
}

/** Takes the remover's turn `path` (takeLockFile; a turn lasts microseconds): this turn's info, or 'busy'. */
function takeTurn(path: string): Result<LockInfo | 'busy', StateDirUnwritable> {
  const info = ownInfo('nodegraph: removing a stale lock');
  const taken = takeLockFile(path, info, TURN_WAIT_MS, 1, moveAsideIfSame);
  if (!taken.ok) return taken;
  return ok(taken.value === 'busy' ? 'busy' : info);
}

/**
 * Creates the lock file `path` holding `info`, looking again every `pollMs` for up to `waitMs`
 * while a live holder has it; a dead holder's (or one written before this boot, unreadable) is
 * removed with `removeDead` and taken. 'busy' when a live holder kept it.
 */
export function takeLockFile(
  path: string,
  info: LockInfo,
  waitMs: number,
  pollMs: number,
  removeDead: (path: string, seen: Exclude<Seen, { kind: 'missing' }>) => Result<'removed' | 'changed', StateDirUnwritable>,
): Result<'created' | 'busy', StateDirUnwritable> {
  for (let waited = 0; ; ) {
    const created = create(path, info);
    if (!created.ok) return created;
    if (created.value === 'created') return ok('created');
    const seen = read(path);
    if (!seen.ok) return seen;
    const s = seen.value;
    if (s.kind === 'missing') continue;
    if (s.kind === 'held' ? liveness(s.info) === 'dead' : writtenBeforeBoot(s.mtimeMs)) {
      const removed = removeDead(path, s);
      if (!removed.ok) return removed;
      continue;
    }
    if (waited >= waitMs) return ok('busy');
    pause(pollMs);
    waited += pollMs;
  }
}

/** Unlinks the lock file `path` if it still holds `token`; never removes another's. */
export function releaseIfOurs(path: string, token: string): Result<'released' | 'not-ours' | 'missing', StateDirUnwritable> {
  const seen = read(path);
  if (!seen.ok) return seen;
  if (seen.value.kind === 'missing') return ok('missing');
  if (seen.value.kind !== 'held' || seen.value.info.token !== token) return ok('not-ours');
  // Between the check and the unlink only a forced unlock plus a new
  // acquire could swap the file; a live holder's lock is never removed.
  try {
    unlinkSync(path);
    return ok('released');
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok('missing');
    return err(unwritable(path, e));
  }
}

/**
 * Removes a remover's turn left by a killed remover, and only that one. The turn
 * is moved aside with rename() (exactly one mover gets any given file) and what
 * was moved is compared with the one judged stale; a fresh turn moved by mistake
 * is put back with link(), which cannot overwrite one taken meanwhile. A third
 * remover taking the turn between that move and the put-back would share it: that
 * needs a remover killed within its turn and three more racing on it.
 */
function moveAsideIfSame(path: string, stale: Exclude<Seen, { kind: 'missing' }>): Result<'removed' | 'changed', StateDirUnwritable> {
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
  if (moved.ok && moved.value.kind === stale.kind && moved.value.content === stale.content) {
    removeQuietly(aside);
    return ok('removed');
  }
  try {
    linkSync(aside, path);
    unlinkSync(aside);
  } catch {
    // see the residual window above
  }
  return ok('changed');
}
