// The live view's area fits the terminal, however many tasks run: what does
// not fit is counted, so the area never scrolls the screen under its cursor.

import { expect, test } from 'vitest';
import { taskId } from '../../src/ids.ts';
import { listedPlan } from '../../src/plan/plan.ts';
import { palette } from '../../src/report/color.ts';
import { ttyReporter } from '../../src/report/tty.ts';

/** The live area as last drawn: after the last move up to its top, each row's clear-to-end dropped. */
const lastFrame = (out: string): string => out.slice(out.search(/\r\x1b\[\d+A(?![\s\S]*\r\x1b\[\d+A)/)).replace(/^\r\x1b\[\d+A/, '').replaceAll('\x1b[K', '');

test('a 6-row terminal shows 3 of 6 running tasks, counts the rest and the queued, and the status line', async () => {
  let out = '';
  const reporter = ttyReporter({ write: (s) => (out += s), c: palette(false), columns: () => 60, rows: () => 6, frameMs: 60_000 });
  const ids = Array.from({ length: 10 }, (_, i) => taskId(`t/${i}`));
  reporter.sink({ type: 'plan', plan: listedPlan(ids.map((id) => ({ id, action: 'create', verb: 'create', reasons: ['never ran'] }))) });
  for (const id of ids.slice(0, 6)) reporter.sink({ type: 'task-start', id, verb: 'create', reason: 'never ran', command: 'true' });
  const frame = lastFrame(out).replace(/\d+ms/g, 'T');
  expect(frame).toBe(['⠋ t/0 create T', '⠋ t/1 create T', '⠋ t/2 create T', '… and 3 more running', '[0/10] 6 running · 4 queued · T', ''].join('\n'));
  await reporter.close();
});

test('a long id or line is cut to the width, so no row wraps', async () => {
  let out = '';
  const reporter = ttyReporter({ write: (s) => (out += s), c: palette(false), columns: () => 30, rows: () => 10, frameMs: 60_000 });
  const id = taskId(`kube1/${'x'.repeat(40)}`);
  reporter.sink({ type: 'plan', plan: listedPlan([{ id, action: 'create', verb: 'create', reasons: ['never ran'] }]) });
  reporter.sink({ type: 'task-start', id, verb: 'create', reason: 'never ran', command: undefined });
  const frame = lastFrame(out);
  for (const line of frame.split('\n')) expect([...line].length).toBeLessThan(30);
  await reporter.close();
});

test('the area is redrawn row by row in place: never a clear to the end of the screen, and rows left over are cleared one by one', async () => {
  const writes: string[] = [];
  const reporter = ttyReporter({ write: (s) => writes.push(s), c: palette(false), columns: () => 60, rows: () => 24, frameMs: 60_000 });
  const ids = [taskId('a'), taskId('b')];
  reporter.sink({ type: 'plan', plan: listedPlan(ids.map((id) => ({ id, action: 'create', verb: 'create', reasons: ['never ran'] }))) });
  reporter.sink({ type: 'task-start', id: ids[0]!, verb: 'create', reason: 'never ran', command: 'true' });
  reporter.sink({ type: 'task-start', id: ids[1]!, verb: 'create', reason: 'never ran', command: 'true' });
  // Three rows (a, b, the status line) become two (b, the status line) under the settled line: the cursor goes up
  // three, writes three rows, and nothing is left to clear.
  reporter.sink({ type: 'task-done', id: ids[0]!, outcome: 'ran', durationMs: 5 });
  expect(writes.at(-1)!.replace(/\d+ms/g, 'T')).toBe('\r\x1b[3A[1/2] ✔ a T\x1b[K\n⠋ b create T\x1b[K\n[1/2] 1 running · 0 queued · T\x1b[K\n');
  // The last one settles with a two-line failure over two rows: nothing left over either; closing clears nothing more.
  reporter.sink({ type: 'task-done', id: ids[1]!, outcome: 'failed', durationMs: 5, error: 'exited with code 1', command: 'false' });
  expect(writes.at(-1)).toBe('\r\x1b[2A[2/2] ✖ b failed: exited with code 1\x1b[K\n    $ false\x1b[K\n');
  await reporter.close();
  expect(writes.join('')).not.toMatch(/\x1b\[[0-2]?J/);
});

test('a shorter area clears the rows it no longer uses, each to its end, and comes back up without scrolling', async () => {
  const writes: string[] = [];
  const reporter = ttyReporter({ write: (s) => writes.push(s), c: palette(false), columns: () => 60, rows: () => 24, frameMs: 60_000 });
  const ids = [taskId('a'), taskId('b'), taskId('c')];
  reporter.sink({ type: 'plan', plan: listedPlan(ids.map((id) => ({ id, action: 'create', verb: 'create', reasons: ['never ran'] }))) });
  writes.length = 0;
  await reporter.close();
  // Four rows (three queued, the status line) give way to three `not run` lines: the fourth row is cleared, the cursor
  // steps down to where it stood (below the area) and back up to under the last line written.
  expect(writes[0]).toBe('\r\x1b[4A- a not run\x1b[K\n- b not run\x1b[K\n- c not run\x1b[K\n\x1b[K\x1b[B\x1b[1A');
});
