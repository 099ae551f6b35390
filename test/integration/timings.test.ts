// --timings: each step of a run, in order, with what it counted, on stderr when the command ends.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { readTimings, type TimedStep } from '../../src/cli/timings.ts';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const graph = `
  const a = ng.task('a', { inputs: { src: ng.file('src.txt') }, outputs: ['out/a'], run: ['cp', 'src.txt', 'out/a'] });
  ng.task('b', { inputs: { a }, outputs: ['out/b'], run: ['cp', 'out/a', 'out/b'] });
`;

/** The steps of the `--timings` block, which must be there, whole: the last is the total. */
function steps(stderr: string): TimedStep[] {
  const read = readTimings(stderr);
  expect(read).toBeDefined();
  expect(read!.at(-1)!.name).toBe('total');
  return read!;
}

test('apply --timings: every step of the run in order, counted, adding up to the total', async () => {
  rig.write('src.txt', 'one\n');
  rig.nodefile(graph);
  const first = await rig.run(['apply', '--timings']);
  expect(first.code).toBe(0);
  const run = steps(first.stderr);
  expect(run.map((s) => s.name)).toEqual(['start', 'load', 'lock', 'nodefile', 'analysis', 'journal', 'hash cache', 'observe', 'plan', 'run', 'generation', 'close', 'finish', 'total']);
  const detail = Object.fromEntries(run.map((s) => [s.name, s.detail]));
  expect(detail['nodefile']).toBe('2 tasks declared');
  expect(detail['journal']).toBe('0 records');
  // A first run reads the source to hash it (a stat before the read, one after); the outputs are not looked at.
  expect(detail['observe']).toBe('2 tasks, 2 stats, 1 file read');
  expect(detail['run']).toBe('2 ran');
  const sum = run.slice(0, -1).reduce((total, s) => total + s.ms, 0);
  expect(Math.abs(sum - run.at(-1)!.ms)).toBeLessThan(0.1 * run.length);

  // The second run also looks at both outputs. (How many files it reads again depends on the clock:
  // one written within the racy window of its hashing is read once more, hash/racy.ts.)
  const again = steps((await rig.run(['apply', '--timings'])).stderr);
  const second = Object.fromEntries(again.map((s) => [s.name, s.detail]));
  expect(second['journal']).toBe('2 records');
  expect(second['observe']).toMatch(/^2 tasks, \d+ stats, [0-3] files? read$/);
  expect(Number(/(\d+) stats/.exec(second['observe']!)![1])).toBeGreaterThanOrEqual(3);
  expect(second['run']).toBe('0 ran');
});

test('plan --timings has no lock, run or generation; without the flag nothing is printed', async () => {
  rig.write('src.txt', 'one\n');
  rig.nodefile(graph);
  const plan = await rig.run(['plan', '--timings']);
  expect(plan.code).toBe(0);
  expect(steps(plan.stderr).map((s) => s.name)).toEqual(['start', 'load', 'nodefile', 'analysis', 'journal', 'hash cache', 'observe', 'plan', 'close', 'finish', 'total']);
  expect(plan.stdout).toContain('Plan: 2 to create');
  expect((await rig.run(['apply'])).stderr).not.toContain('Timings');
});

test('a Nodefile that does not load: its error, and the steps up to it', async () => {
  rig.nodefile(`ng.task('a', { run: ['true'], bogus: 1 });`);
  const result = await rig.run(['apply', '--timings']);
  expect(result.code).toBe(1);
  expect(result.stderr).toContain('bogus');
  expect(steps(result.stderr).map((s) => s.name)).toEqual(['start', 'load', 'lock', 'finish', 'total']);
});
