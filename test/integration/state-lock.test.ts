// The state lock, on real temp dirs.

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { acquire, breakLock, forceUnlock, openState, readLock, readState, type Lock } from '../../src/state/index.ts';
import { read, removeStale } from '../../src/state/lock-file.ts';

let dir: string;
const held: Lock[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodegraph-lock-'));
});
afterEach(() => {
  for (const l of held.splice(0)) l.release();
  chmodSync(dir, 0o755);
  rmSync(dir, { recursive: true, force: true });
});

const lockFile = (): string => join(dir, 'lock');

function take(command = 'nodegraph apply'): Lock {
  const l = acquire(dir, { command });
  if (!l.ok) throw new Error(JSON.stringify(l.error));
  held.push(l.value);
  return l.value;
}

/** A pid that certainly belonged to a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  expect(child.status).toBe(0);
  return child.pid!;
}

test('the lock file holds pid, host, command and start time', () => {
  const l = take('nodegraph apply --jobs 2');
  const info = JSON.parse(readFileSync(lockFile(), 'utf8'));
  expect(info).toMatchObject({ pid: process.pid, host: hostname(), command: 'nodegraph apply --jobs 2' });
  expect(new Date(info.startedAt).toString()).not.toBe('Invalid Date');
  expect(info.token).toBe(l.info.token);
  expect(l.tookOverFrom).toBeUndefined();
  expect(l.isHeld()).toBe(true);
});

test('a second acquire is refused with the holder', () => {
  take('nodegraph apply');
  const second = acquire(dir, { command: 'nodegraph destroy' });
  expect(second.ok).toBe(false);
  if (!second.ok) {
    expect(second.error).toMatchObject({
      reason: 'locked',
      path: lockFile(),
      holder: { pid: process.pid, host: hostname(), command: 'nodegraph apply' },
      otherHost: false,
    });
  }
});

test('the state dir is created (mkdir -p)', () => {
  const deep = join(dir, 'a', 'b', 'state');
  const l = acquire(deep);
  expect(l.ok).toBe(true);
  if (l.ok) {
    expect(existsSync(join(deep, 'lock'))).toBe(true);
    l.value.release();
  }
});

test('a lock left by a dead process on this host is taken over', () => {
  const pid = deadPid();
  writeFileSync(
    lockFile(),
    JSON.stringify({ pid, host: hostname(), command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 'old' }),
  );
  const l = take();
  expect(l.tookOverFrom).toMatchObject({ pid, command: 'nodegraph apply' });
  expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).toBe(process.pid);
  expect(readdirSync(dir).filter((n) => n.startsWith('lock.'))).toEqual([]);
});

test('a stale lock judged by one run and taken over by another first: the new lock is not touched, not even for a moment', () => {
  writeFileSync(lockFile(), `${JSON.stringify({ pid: deadPid(), host: hostname(), command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 'old' })}\n`);
  const judged = read(lockFile());
  if (!judged.ok || judged.value.kind !== 'held') throw new Error('the stale lock was not read');
  const winner = take();
  // ext4 gives the stale lock's inode to the next file created: the winner's lock may carry the very inode judged.
  const now = statSync(lockFile(), { bigint: true });
  const sameInode = { ...judged.value, dev: Number(now.dev), ino: Number(now.ino) };
  expect(removeStale(lockFile(), sameInode)).toEqual({ ok: true, value: 'changed' });
  // A rename aside and back would change the inode's ctime; a lock moved for a moment lets a third run in.
  expect(statSync(lockFile(), { bigint: true }).ctimeNs).toBe(now.ctimeNs);
  expect(winner.isHeld()).toBe(true);
});

test('a remover killed while taking its turn leaves lock.takeover: the next run takes the turn over and the lock', () => {
  const dead = { pid: deadPid(), host: hostname(), command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z' };
  writeFileSync(lockFile(), `${JSON.stringify({ ...dead, token: 'old' })}\n`);
  writeFileSync(`${lockFile()}.takeover`, `${JSON.stringify({ ...dead, token: 'turn' })}\n`);
  const l = take();
  expect(l.tookOverFrom).toMatchObject({ pid: dead.pid });
  expect(readdirSync(dir).filter((n) => n.startsWith('lock.'))).toEqual([]);
});

test('a lock held by a zombie (killed, not yet reaped by its parent) is taken over', async () => {
  if (!existsSync('/proc/self/stat')) return; // not Linux
  // perl forks a child that exits at once and never waits for it (a shell may reap it first).
  const parent = spawn('perl', ['-e', '$| = 1; my $pid = fork() // die; exit 0 if $pid == 0; print "$pid\\n"; sleep 30'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  try {
    const pid = Number((await once(parent.stdout, 'data'))[0].toString().trim());
    const stateOf = (): string => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      return stat.charAt(stat.lastIndexOf(')') + 2);
    };
    for (let i = 0; i < 200 && stateOf() !== 'Z'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(stateOf()).toBe('Z');
    expect(() => process.kill(pid, 0)).not.toThrow(); // kill(pid, 0) alone would call it alive
    writeFileSync(lockFile(), JSON.stringify({ pid, host: hostname(), command: 'nodegraph apply', startedAt: 's', token: 'old' }));
    expect(take().tookOverFrom?.pid).toBe(pid);
  } finally {
    parent.kill('SIGKILL');
  }
});

test('a lock from an earlier boot is stale even if its pid is alive now', () => {
  const boot = (() => {
    try {
      return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      return undefined;
    }
  })();
  if (boot === undefined) return; // not Linux
  // pid 1 is always alive, but the lock says it is from another boot.
  writeFileSync(lockFile(), JSON.stringify({ pid: 1, host: hostname(), command: 'x', startedAt: 's', token: 't', bootId: 'another-boot' }));
  expect(take().tookOverFrom?.pid).toBe(1);
});

test('a live holder on this host is not taken over', () => {
  writeFileSync(lockFile(), JSON.stringify({ pid: 1, host: hostname(), command: 'init', startedAt: 's', token: 't' }));
  const r = acquire(dir);
  expect(r).toMatchObject({ ok: false, error: { reason: 'locked', holder: { pid: 1 }, otherHost: false } });
});

test('a pid now held by a process that started at another time is another process: its lock is stale', () => {
  if (!existsSync('/proc/self/stat')) return; // not Linux
  const startOf = (pid: number): number => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  };
  // As a nodegraph that was pid 1 of an earlier container finds pid 1 alive in the next one.
  for (const pid of [1, process.pid]) {
    writeFileSync(lockFile(), JSON.stringify({ pid, host: hostname(), command: 'nodegraph apply', startedAt: 's', token: 't', pidStart: startOf(pid) + 1 }));
    const l = take();
    expect(l.tookOverFrom?.pid).toBe(pid);
    // The lock just taken records when this process started.
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pidStart).toBe(startOf(process.pid));
    l.release();
  }
  // The same pid that started when the lock says is the holder: refused.
  writeFileSync(lockFile(), JSON.stringify({ pid: 1, host: hostname(), command: 'init', startedAt: 's', token: 't', pidStart: startOf(1) }));
  expect(acquire(dir)).toMatchObject({ ok: false, error: { reason: 'locked', holder: { pid: 1 } } });
});

test('a lock from another host is never taken over automatically', () => {
  const pid = deadPid();
  writeFileSync(lockFile(), JSON.stringify({ pid, host: 'elsewhere', command: 'nodegraph apply', startedAt: 's', token: 't' }));
  const r = acquire(dir);
  expect(r).toMatchObject({ ok: false, error: { reason: 'locked', holder: { pid, host: 'elsewhere' }, otherHost: true } });
  expect(existsSync(lockFile())).toBe(true);
});

test('an unreadable lock is refused, not taken over, and reported with its content', () => {
  writeFileSync(lockFile(), '{"pid": 12');
  const r = acquire(dir);
  expect(r).toMatchObject({ ok: false, error: { reason: 'locked', holder: undefined, unreadable: { content: '{"pid": 12' } } });
  writeFileSync(lockFile(), JSON.stringify({ pid: 0, host: hostname(), command: 'x', startedAt: 's' }));
  expect(acquire(dir)).toMatchObject({ ok: false, error: { unreadable: { message: expect.stringMatching(/pid/) } } });
  expect(existsSync(lockFile())).toBe(true);
});

test('an unreadable lock written before this boot (a power loss mid-write) is removed and the lock taken', () => {
  const beforeBoot = new Date('2001-02-03T04:05:06Z');
  for (const content of ['', '\0\0\0\0', '{"pid": 12']) {
    writeFileSync(lockFile(), content);
    utimesSync(lockFile(), beforeBoot, beforeBoot);
    const l = take();
    expect(l.removedUnreadable).toMatchObject({ content, writtenAt: '2001-02-03T04:05:06.000Z' });
    expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid });
    expect(l.release()).toEqual({ ok: true, value: 'released' });
  }
  // Written since this boot, it may be a lock being written this very moment: refused, as above.
  writeFileSync(lockFile(), '');
  expect(acquire(dir)).toMatchObject({ ok: false, error: { reason: 'locked', holder: undefined, unreadable: { message: 'the lock file is empty' } } });
  expect(readdirSync(dir)).toEqual(['lock']);
});

test('release removes the lock only if it is still ours', () => {
  const l = take();
  expect(l.release()).toEqual({ ok: true, value: 'released' });
  expect(existsSync(lockFile())).toBe(false);
  expect(l.release()).toEqual({ ok: true, value: 'missing' });

  const mine = take();
  // Someone forces the lock and another run takes it.
  expect(breakLock(dir).ok).toBe(true);
  const theirs = take('nodegraph destroy');
  expect(mine.isHeld()).toBe(false);
  expect(mine.release()).toEqual({ ok: true, value: 'not-ours' });
  expect(existsSync(lockFile())).toBe(true);
  expect(theirs.isHeld()).toBe(true);
});

test('breakLock / forceUnlock remove any lock and return the holder they removed', () => {
  expect(breakLock(dir)).toEqual({ ok: true, value: { removed: false } });
  writeFileSync(lockFile(), JSON.stringify({ pid: 1, host: 'elsewhere', command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 'x' }));
  const r = breakLock(dir);
  expect(r).toMatchObject({ ok: true, value: { removed: true, holder: { pid: 1, host: 'elsewhere', command: 'nodegraph apply' } } });
  expect(existsSync(lockFile())).toBe(false);
  expect(readdirSync(dir)).toEqual([]);

  // The CLI-facing form: the holder, or undefined when there was no lock.
  expect(forceUnlock(dir)).toEqual({ ok: true, value: undefined });
  take('nodegraph apply');
  expect(forceUnlock(dir)).toMatchObject({ ok: true, value: { pid: process.pid, command: 'nodegraph apply' } });
  writeFileSync(lockFile(), 'garbage');
  const g = forceUnlock(dir);
  expect(g.ok && g.value?.command).toMatch(/unreadable lock file/);
});

test('readLock reports without touching', () => {
  expect(readLock(dir)).toEqual({ ok: true, value: undefined });
  take('nodegraph apply');
  expect(readLock(dir)).toMatchObject({ ok: true, value: { holder: { pid: process.pid } } });
});

test('an unwritable state dir is an error value, not a throw', () => {
  // Tests may run as root, which ignores permission bits: use a path under a regular file.
  const blocker = join(dir, 'blocker');
  writeFileSync(blocker, 'a file, not a folder\n');
  const r = acquire(join(blocker, 'state'));
  expect(r).toMatchObject({ ok: false, error: { reason: 'state-dir-unwritable', path: join(blocker, 'state'), code: 'ENOTDIR' } });
  if (!r.ok) expect(r.error.reason === 'state-dir-unwritable' && r.error.message).toMatch(/ENOTDIR/);

  // The state dir itself being a file.
  expect(acquire(blocker)).toMatchObject({ ok: false, error: { reason: 'state-dir-unwritable' } });

  // Through openState too, and nothing is written.
  expect(openState(join(blocker, 'state'), { lock: true })).toMatchObject({ ok: false, error: { reason: 'state-dir-unwritable', code: 'ENOTDIR' } });
  expect(readState(join(blocker, 'state'))).toMatchObject({ ok: false, error: { reason: 'state-unreadable', kind: 'io' } });
  expect(readFileSync(blocker, 'utf8')).toBe('a file, not a folder\n');
});

test('a read-only state dir is an error value (when not root)', () => {
  if (process.getuid?.() === 0) return; // root bypasses permission bits
  chmodSync(dir, 0o555);
  expect(acquire(dir)).toMatchObject({ ok: false, error: { reason: 'state-dir-unwritable', code: 'EACCES' } });
});
