// kill -9 of nodegraph while a task's command runs: the command, what it
// started in its session and the loop that keeps writing a file are ended by
// the next run that takes the lock, before that run's first task, and it says
// so (src/state/processes.ts). Through spawnd, and through the direct spawn
// that stands in for it where it is not built or is turned off.

import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { afterEach, expect, test } from 'vitest';
import { alive, Rig, until } from '../support/rig.ts';

const rigs: Rig[] = [];
const strays: number[] = [];
afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
  for (const rig of rigs.splice(0)) rig.cleanup();
});

// In mode 'hang' the task starts a loop that writes `ticking` every 5 ms and a sleep,
// both in its session, writes their pids and the shell's, then waits for ever. In mode
// 'probe' it writes which of those pids still run, as the first thing of its run.
const SCRIPT = [
  'if [ "$(cat mode)" = hang ]; then',
  '  (while :; do date +%s%N > ticking; sleep 0.005; done) & loop=$!',
  '  sleep 1000 & sleeper=$!',
  '  echo "$$ $loop $sleeper" > pids.new && mv pids.new pids',
  '  wait',
  'else',
  '  : > alive-at-probe',
  '  for p in $(cat pids); do',
  '    if [ -e /proc/$p/stat ] && [ "$(cut -d" " -f3 /proc/$p/stat)" != Z ]; then echo $p >> alive-at-probe; fi',
  '  done',
  'fi',
].join('\n');

function project(): Rig {
  const rig = new Rig('nodegraph-killed-');
  rigs.push(rig);
  rig.nodefile(`ng.task('work', { inputs: { mode: ng.file('mode') }, run: { shell: ${JSON.stringify(SCRIPT)} } });`);
  return rig;
}

test.each([
  { runner: 'spawnd', env: {} as Record<string, string> },
  { runner: 'direct spawn', env: { NODEGRAPH_SPAWN_SERVER: 'off' } },
])('through $runner: the next apply ends the killed run’s processes before its first task, and says which', async ({ env }) => {
  const rig = project();
  writeFileSync(rig.path('mode'), 'hang\n');
  const child = rig.spawn(['apply'], env);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await until(() => rig.exists('pids') && rig.exists('ticking'));
  const pids = rig.read('pids').trim().split(' ').map(Number);
  strays.push(...pids);
  expect(pids.every(alive)).toBe(true);
  child.kill('SIGKILL');
  await exited;
  // The killed run's processes go on without it: the file keeps changing.
  const first = rig.read('ticking');
  await until(() => rig.read('ticking') !== first);
  expect(pids.every(alive)).toBe(true);

  writeFileSync(rig.path('mode'), 'probe\n');
  const next = await rig.run(['apply'], env);
  expect(next.stderr).toBe('');
  expect(next.code).toBe(0);
  // The probe is the new run's first (and only) task: none of them was running then.
  expect(rig.read('alive-at-probe')).toBe('');
  expect(pids.filter(alive)).toEqual([]);
  const warning = next.stdout.split('\n').find((line) => line.includes('processes of the killed run'));
  expect(warning).toMatch(new RegExp(`^warning: ended [3-9] processes of the killed run ${child.pid} \\(nodegraph apply, since \\S+\\): `));
  for (const pid of pids) expect(warning).toContain(`${pid} (`);
  expect(warning).toContain('(sleep 1000)');
  // Nothing writes the file any more (a plan, a few hundred milliseconds, goes by).
  const last = rig.read('ticking');
  expect((await rig.run(['plan'])).code).toBe(0);
  expect(readFileSync(rig.path('ticking'), 'utf8')).toBe(last);
  // The record of the killed run is gone with it, and the finished run left none.
  expect(readdirSync(rig.path('.nodegraph')).filter((n) => n.startsWith('processes.'))).toEqual([]);
});
