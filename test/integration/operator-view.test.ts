// What the operator is told matches what happens: every task a plan lists
// settles with a line of its own, a counter counts each step against its own
// total, "may" is said only of what may not run, and a summary counts what
// was done, by what was done.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

/** a → b → c, where a's output is its input's line count: an edit that keeps the count is cut off at a. */
const CHAIN = `
  const a = ng.task('a', { inputs: { f: ng.file('in.txt') }, outputs: ['a.out'], run: ['sh', '-c', 'wc -l < in.txt > a.out'] });
  const b = ng.task('b', { inputs: { a }, outputs: ['b.out'], run: ['sh', '-c', 'cat a.out > b.out'] });
  ng.task('c', { inputs: { b }, outputs: ['c.out'], run: ['sh', '-c', 'wc -c < b.out > c.out'] });
`;

const events = (stdout: string): { type: string; id?: string; outcome?: string; counts?: Record<string, number> }[] =>
  stdout.trim().split('\n').map((l) => JSON.parse(l) as never);

test('each task the plan lists as known after apply settles with a line, as early cutoff leaves it up to date', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(CHAIN);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.write('in.txt', 'two\n');
  const applied = await rig.run(['apply']);
  expect(applied.code).toBe(0);
  expect(applied.stdout).toContain('[2/3] ✔ b up to date');
  expect(applied.stdout).toContain('[3/3] ✔ c up to date');
  rig.write('in.txt', 'three\n');
  const json = events((await rig.run(['apply', '--json'])).stdout);
  expect(json.filter((e) => e.type === 'task-done').map((e) => `${e.id} ${e.outcome}`)).toEqual(['a ran', 'b up-to-date', 'c up-to-date']);
});

test('a drifted task waiting on an upstream is certain to run: the plan says so, not "may"', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(CHAIN);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.write('in.txt', 'one\ntwo\n');
  rig.write('c.out', 'edited\n');
  const plan = await rig.run(['plan']);
  expect(plan.stdout).toMatch(/\? b +may update +known after a/);
  expect(plan.stdout).toMatch(/! c +update +output .*c\.out modified outside nodegraph/);
  const status = await rig.run(['status']);
  expect(status.stdout).toMatch(/c +drifted +output/);
});

test("an atomic apply's rollback counts its own teardown from 1", async () => {
  rig.nodefile(`
  ng.settings({ atomic: true });
  const a = ng.task('a', { outputs: ['a.out'], run: ['sh', '-c', 'echo a > a.out'] });
  const b = ng.task('b', { inputs: { a }, outputs: ['b.out'], run: ['sh', '-c', 'cat a.out > b.out'] });
  ng.task('c', { inputs: { b }, run: ['false'] });
`);
  const applied = await rig.run(['apply', '-j', '1']);
  expect(applied.code).toBe(1);
  const teardown = applied.stdout.slice(applied.stdout.indexOf('rollback: destroying'));
  const counters = teardown.match(/\[\d+\/\d+\]/g) ?? [];
  expect(counters.length).toBeGreaterThan(1);
  expect(counters).toEqual(counters.map((_, i) => `[${i + 1}/${counters.length}]`));
});

test("a task retired with retire: 'stop' is counted as stopped, not destroyed", async () => {
  rig.nodefile(`
  ng.task('kept', { outputs: ['kept.out'], run: ['sh', '-c', 'echo k > kept.out'], stop: ['true'], retire: 'stop' });
  ng.task('gone', { outputs: ['gone.out'], run: ['sh', '-c', 'echo g > gone.out'] });
`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.nodefile('');
  const applied = await rig.run(['apply', '--json']);
  expect(applied.code).toBe(0);
  expect(events(applied.stdout).find((e) => e.type === 'summary')?.counts).toMatchObject({ destroyed: 1, stopped: 1 });
  expect(rig.exists('kept.out')).toBe(true);
  expect(rig.exists('gone.out')).toBe(false);
});

test('rollback with no applied generation before the current one says so, and how to name one', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(CHAIN);
  const none = await rig.run(['rollback']);
  expect(none.code).toBe(1);
  expect(none.stderr).toBe('error[generation-missing]: no generation is current, so none before it to roll back to\n');
  expect((await rig.run(['apply'])).code).toBe(0);
  const first = await rig.run(['rollback']);
  expect(first.stderr).toBe(
    'error[generation-missing]: there is no applied generation before generation 1 to roll back to (known: 1; `nodegraph rollback N` applies generation N)\n',
  );
});

test('destroy of a target says first which tasks it takes that were not named, with --yes too', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(CHAIN);
  expect((await rig.run(['apply'])).code).toBe(0);
  const destroyed = await rig.run(['destroy', '--yes', 'b']);
  expect(destroyed.code).toBe(0);
  expect(destroyed.stdout.split('\n')[0]).toBe('warning: destroy also takes 2 tasks not named, what depends on the targets and what only they use (by an input or `after`): c, a');
  expect(['a.out', 'b.out', 'c.out'].filter((f) => rig.exists(f))).toEqual([]);
});

test('a promise the Nodefile leaves unawaited that fails stops the run as Ctrl-C does: no task left running, the lock released, exit 1', async () => {
  rig.nodefile(`
  ng.task('slow', { outputs: ['slow.out'], run: ['sh', '-c', 'sleep 30; touch slow.out'] });
  ng.task('f', { run: async (ctx) => { void ctx.exec(['false']); } });
`);
  const applied = await rig.run(['apply', '-j', '2']);
  expect(applied.code).toBe(1);
  expect(applied.stderr).toContain('error[unawaited-promise]: a promise nobody awaited failed (in the Nodefile or a function of its tasks): false: exited with code 1\n');
  expect(applied.stdout).toContain('slow canceled');
  expect(rig.exists('.nodegraph/lock')).toBe(false);
  const status = await rig.run(['status']);
  expect(status.stdout).toMatch(/slow +failed +last run was canceled/);
  // Under --json the error is an error line on stdout too, valid against the schema.
  const json = await rig.run(['apply', '-j', '2', '--json', '--replace', 'f']);
  expect(json.code).toBe(1);
  const events = json.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string; failure?: unknown });
  for (const event of events) valid('events', event);
  expect(events.filter((e) => e.type === 'error').map((e) => e.failure)).toEqual([{ reason: 'unawaited-promise', message: 'false: exited with code 1' }]);
});

test('a timer the Nodefile or a function task leaves behind does not keep nodegraph running once the run is over', async () => {
  // Each would hold the event loop for a minute.
  rig.write(
    'Nodefile.ts',
    `setTimeout(() => {}, 60_000);\nexport default (ng: any) => { ng.task('t', { run: async () => { setTimeout(() => {}, 60_000); } }); };\n`,
  );
  const applied = await rig.run(['apply']);
  expect(applied.code).toBe(0);
  expect(applied.stdout).toContain('Apply: 1 ran');
}, 20_000);

test('a function task that calls process.exit fails, and the run ends as any failed run does: recorded, the lock released', async () => {
  rig.nodefile(`
  ng.task('quits', { run: () => { process.exit(3); } });
  ng.task('other', { outputs: ['other.out'], run: ['sh', '-c', 'echo o > other.out'] });
`);
  const applied = await rig.run(['apply', '-k']);
  expect(applied.code).toBe(1);
  expect(applied.stdout).toContain('quits failed: process.exit(3) was called: nodegraph ends its own run, and this code cannot end it');
  expect(rig.exists('other.out')).toBe(true);
  expect(rig.exists('.nodegraph/lock')).toBe(false);
  expect((await rig.run(['status'])).stdout).toMatch(/quits +failed/);
});

test("under --json, what the Nodefile's code logs goes to stderr: stdout stays JSON lines", async () => {
  rig.nodefile(`
  console.log('declaring');
  ng.task('a', { run: () => { console.info('running a'); } });
`);
  const applied = await rig.run(['apply', '--json']);
  expect(applied.code).toBe(0);
  expect(() => events(applied.stdout)).not.toThrow();
  expect(applied.stderr).toBe('declaring\nrunning a\n');
  const plan = await rig.run(['plan', '--json']);
  expect(() => JSON.parse(plan.stdout) as unknown).not.toThrow();
});
