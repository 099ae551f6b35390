// The record of what a run started, and its ending by the next holder of the
// lock (src/state/processes.ts), on real processes: a recorded session is
// ended whole; a pid that now names another process, a live holder's record
// and a container (another pid namespace) in the session are left alone.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { LocalRunner } from '../../src/execute/runner.ts';
import { Spawnd } from '../../src/execute/spawnd.ts';
import { acquire, type Lock } from '../../src/state/lock.ts';
import { noteStarted, procStat } from '../../src/state/processes.ts';
import { alive, until } from '../support/rig.ts';

let dir: string;
const held: Lock[] = [];
const started: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodegraph-procs-'));
});
afterEach(() => {
  for (const l of held.splice(0)) l.release();
  for (const c of started.splice(0)) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

function take(): Lock {
  const l = acquire(dir, { command: 'nodegraph apply' });
  if (!l.ok) throw new Error(JSON.stringify(l.error));
  held.push(l.value);
  return l.value;
}

/** A session of its own running `script`, which writes the pids it wants seen to `pids`. */
async function session(script: string): Promise<{ leader: number; pids: number[] }> {
  const child = spawn('/bin/sh', ['-c', script], { cwd: dir, detached: true, stdio: 'ignore' });
  started.push(child);
  await until(() => existsSync(join(dir, 'pids')) && readFileSync(join(dir, 'pids'), 'utf8').endsWith('\n'));
  const pids = readFileSync(join(dir, 'pids'), 'utf8').trim().split(/\s+/).map(Number);
  rmSync(join(dir, 'pids'));
  return { leader: child.pid!, pids };
}

/** The record a run killed with -9 left: a holder that has exited, and the processes it started. */
function deadRunRecord(entries: readonly { pid: number; start: number }[], holder: Partial<Record<string, unknown>> = {}): string {
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  const info = { pid: gone, host: hostname(), command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 'killed', ...holder };
  const file = join(dir, `processes.${String(info.token)}`);
  writeFileSync(file, `${JSON.stringify(info)}\n${entries.map((e) => `${e.pid} ${e.start}\n`).join('')}`);
  return file;
}

const startOf = (pid: number): number => procStat(pid)!.start!;

test('the next holder ends a dead run’s recorded sessions whole, grandchildren too, and removes the record', async () => {
  const { leader, pids } = await session('sh -c "sleep 1000 & echo \\$! > inner; wait" & sleep 1000 & echo $$ $! > pids.new; until [ -s inner ]; do :; done; cat inner >> pids.new; mv pids.new pids; wait');
  const all = [leader, ...pids];
  expect(all.every(alive)).toBe(true);
  const file = deadRunRecord([{ pid: leader, start: startOf(leader) }]);
  const lock = take();
  await until(() => !all.some(alive));
  const ended = lock.endedProcesses!;
  expect(ended).toHaveLength(1);
  expect(ended[0]!.holder.token).toBe('killed');
  for (const pid of all) expect(ended[0]!.ended.map((p) => p.pid)).toContain(pid);
  expect(ended[0]!.remaining).toEqual([]);
  expect(existsSync(file)).toBe(false);
});

test('a recorded pid that now names a process started at another time is another process: left alone', async () => {
  const { leader } = await session('echo $$ > pids; exec sleep 1000');
  const file = deadRunRecord([{ pid: leader, start: startOf(leader) - 1 }]);
  const lock = take();
  expect(lock.endedProcesses).toEqual([]);
  expect(alive(leader)).toBe(true);
  expect(existsSync(file)).toBe(false);
});

test('the record of a run that still runs (its lock broken by hand) is left alone', async () => {
  const { leader } = await session('echo $$ > pids; exec sleep 1000');
  const file = deadRunRecord([{ pid: leader, start: startOf(leader) }], { pid: process.pid, pidStart: startOf(process.pid) });
  const lock = take();
  expect(lock.endedProcesses).toEqual([]);
  expect(alive(leader)).toBe(true);
  expect(existsSync(file)).toBe(true);
});

test('the holder records what it starts, and a released lock leaves no record', () => {
  const lock = take();
  const file = join(dir, `processes.${lock.info.token}`);
  noteStarted(process.pid);
  const lines = readFileSync(file, 'utf8').split('\n');
  expect(JSON.parse(lines[0]!)).toMatchObject({ pid: process.pid, token: lock.info.token });
  expect(lines[1]).toBe(`${process.pid} ${startOf(process.pid)}`);
  lock.release();
  expect(existsSync(file)).toBe(false);
});

// A container's processes are machine state: `unshare --pid --fork` puts one in a new pid namespace, in the same session.
const unshare = spawnSync('unshare', ['--pid', '--fork', 'true']).status === 0;
test.skipIf(!unshare)('a process of the session in another pid namespace (a container) is left running', async () => {
  const { leader, pids } = await session('unshare --pid --fork sleep 1000 & sleep 1000 & echo $! > pids; wait');
  const [sleeper] = pids;
  // The namespaced sleep: the one child of unshare.
  let contained = 0;
  await until(() => {
    const out = spawnSync('pgrep', ['-s', String(leader), '-x', 'sleep'], { encoding: 'utf8' }).stdout.trim().split('\n').map(Number);
    contained = out.find((p) => p !== sleeper) ?? 0;
    return contained > 0;
  });
  deadRunRecord([{ pid: leader, start: startOf(leader) }]);
  const lock = take();
  await until(() => !alive(leader) && !alive(sleeper!));
  expect(alive(contained)).toBe(true);
  expect(lock.endedProcesses![0]!.ended.map((p) => p.pid)).not.toContain(contained);
});

test('every way the runner starts a process is recorded: spawnd (whose session holds its commands), a direct spawn, execa', async () => {
  const lock = take();
  const spawnd = new Spawnd();
  try {
    const runner = new LocalRunner({ spawnd });
    // Each prints its pid and its session (/proc/<pid>/stat's 6th field; sh's comm has no space).
    const script = { shell: 'echo $$ $(cut -d" " -f6 /proc/$$/stat)' };
    const viaSpawnd = (await runner.runTask(script, { cwd: dir })).stdout.trim().split(' ').map(Number);
    const direct = (await runner.run(script, { cwd: dir })).stdout.trim().split(' ').map(Number);
    const fed = (await runner.run({ shell: 'cat >/dev/null; echo $$ $(cut -d" " -f6 /proc/$$/stat)' }, { cwd: dir, input: 'x' })).stdout.trim().split(' ').map(Number);
    expect(spawnd.pid).toBeDefined();
    const recorded = readFileSync(join(dir, `processes.${lock.info.token}`), 'utf8').split('\n').slice(1, -1).map((l) => Number(l.split(' ')[0]));
    expect(viaSpawnd[1]).toBe(spawnd.pid);
    expect(direct[0]).toBe(direct[1]);
    expect(fed[0]).toBe(fed[1]);
    expect(recorded).toEqual(expect.arrayContaining([spawnd.pid, direct[0], fed[0]]));
  } finally {
    spawnd.close();
  }
});

test('a spawnd started before the lock was taken (watch keeps it from one run to the next) is in the new record, until it ends', async () => {
  const spawnd = new Spawnd();
  try {
    expect((await new LocalRunner({ spawnd }).runTask(['true'], { cwd: dir })).ok).toBe(true);
    const first = take();
    const lines = (l: Lock): string[] => readFileSync(join(dir, `processes.${l.info.token}`), 'utf8').split('\n').slice(1, -1);
    expect(lines(first)).toEqual([`${spawnd.pid} ${startOf(spawnd.pid!)}`]);
    first.release();
    held.splice(held.indexOf(first), 1);
    spawnd.close();
    // Gone once its end is seen ('close'): a record opened from then on leaves it out.
    await until(() => {
      const next = take();
      const empty = lines(next).length === 0;
      next.release();
      held.splice(held.indexOf(next), 1);
      return empty;
    });
    expect(alive(spawnd.pid!)).toBe(false);
  } finally {
    spawnd.close();
  }
});
