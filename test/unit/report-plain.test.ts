// The plain reporter's lines for tasks that did not succeed (CI logs read these).

import { expect, test } from 'vitest';
import type { EngineEvent } from '../../src/events.ts';
import { taskId } from '../../src/ids.ts';
import { palette } from '../../src/report/color.ts';
import { plainReporter } from '../../src/report/plain.ts';

function lines(events: EngineEvent[]): string {
  let out = '';
  const reporter = plainReporter({ write: (s: string) => (out += s), c: palette(false) });
  for (const e of events) reporter.sink(e);
  void reporter.close();
  return out;
}

test('a failure names what failed, then the command and its output; a cancel says only that', () => {
  const id = taskId('a');
  const text = lines([
    { type: 'task-done', id, outcome: 'failed', durationMs: 3, error: 'exited with code 3\nmore', command: 'sh -c x', output: 'boom\n' },
    { type: 'task-done', id: taskId('b'), outcome: 'canceled', durationMs: 3, error: 'canceled', command: 'sleep 9', output: '' },
    { type: 'task-done', id: taskId('c'), outcome: 'failed', durationMs: 3, error: '' },
  ]);
  expect(text).toBe('[1/1] ✖ a failed: exited with code 3\n    $ sh -c x\n    boom\n[2/2] ✖ b canceled\n    $ sleep 9\n[3/3] ✖ c failed\n');
});

test("what a command printed follows its line, as ninja shows it; a function's ctx.log shows as it comes", () => {
  const text = lines([
    { type: 'task-log', id: taskId('fn'), message: 'hello' },
    { type: 'task-done', id: taskId('fn'), outcome: 'ran', durationMs: 1 },
    { type: 'task-done', id: taskId('say'), outcome: 'ran', durationMs: 12, command: 'echo hi', output: 'hi\nthere\n' },
    { type: 'task-done', id: taskId('quiet'), outcome: 'ran', durationMs: 3, outputsChanged: false },
  ]);
  expect(text).toBe('  fn: hello\n[1/1] ✔ fn 1ms\n[2/2] ✔ say 12ms\n    hi\n    there\n[3/3] ✔ quiet 3ms (outputs unchanged)\n');
});

test('each settled task is counted against what the plan says will act, as ninja counts: [done/total]', () => {
  const counts = { create: 38, update: 1, replace: 0, drift: 0, maybe: 0, destroy: 1, stop: 0, unchanged: 500 };
  const plan = { size: 540, counts, [Symbol.iterator]: () => [][Symbol.iterator](), entries: () => [], toJSON: () => ({ entries: [], counts }) };
  let out = '';
  const reporter = plainReporter({ write: (s: string) => (out += s), c: palette(false), showPlan: false });
  reporter.sink({ type: 'plan', plan });
  reporter.sink({ type: 'destroy-start', id: taskId('old'), command: undefined });
  reporter.sink({ type: 'destroy-done', id: taskId('old'), outcome: 'destroyed' });
  reporter.sink({ type: 'task-start', id: taskId('a'), verb: 'create', reason: 'never ran', command: 'true' });
  reporter.sink({ type: 'task-done', id: taskId('a'), outcome: 'ran', durationMs: 1234 });
  reporter.sink({ type: 'task-done', id: taskId('b'), outcome: 'up-to-date', durationMs: 0 });
  reporter.sink({ type: 'task-done', id: taskId('c'), outcome: 'skipped', durationMs: 0, because: taskId('x') });
  void reporter.close();
  expect(out).toBe(
    [
      '▶ old remove outputs',
      '[1/40] ✔ old done',
      '▶ a create: never ran',
      '[2/40] ✔ a 1.2s',
      '[3/40] ✔ b up to date (what it consumes came out unchanged)',
      '[4/40] - c skipped (x did not succeed)',
      '',
    ].join('\n'),
  );
});

test('a task skipped because the run stopped says what stopped it', () => {
  const text = lines([
    { type: 'task-done', id: taskId('a'), outcome: 'failed', durationMs: 3, error: 'exited with code 1' },
    { type: 'task-done', id: taskId('b'), outcome: 'skipped', durationMs: 0 },
  ]);
  expect(text).toBe('[1/1] ✖ a failed: exited with code 1\n[2/2] - b skipped (the run stopped after a failed)\n');
  expect(lines([{ type: 'task-done', id: taskId('b'), outcome: 'skipped', durationMs: 0 }])).toBe('[1/1] - b skipped (the run stopped first)\n');
});

test('a destroy without a plan counts against the total its starts say: [1/3], [2/3], [3/3], skipped ones too', () => {
  const text = lines([
    { type: 'destroy-start', id: taskId('web'), command: 'rm -rf www', total: 3 },
    { type: 'destroy-done', id: taskId('web'), outcome: 'destroyed' },
    { type: 'destroy-start', id: taskId('db'), command: undefined, total: 3 },
    { type: 'destroy-done', id: taskId('db'), outcome: 'failed', error: 'exited with code 1' },
    { type: 'destroy-done', id: taskId('net'), outcome: 'skipped', because: 'db was not torn down' },
  ]);
  expect(text).toBe(
    ['▶ web rm -rf www', '[1/3] ✔ web done', '▶ db remove outputs', '[2/3] ✖ db failed: exited with code 1', '[3/3] - net kept (db was not torn down)', ''].join('\n'),
  );
});
