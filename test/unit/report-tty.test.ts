// The live view's area fits the terminal, however many tasks run: what does
// not fit is counted, so the area never scrolls the screen under its cursor.

import { expect, test } from 'vitest';
import { taskId } from '../../src/ids.ts';
import { listedPlan } from '../../src/plan/plan.ts';
import { palette } from '../../src/report/color.ts';
import { ttyReporter } from '../../src/report/tty.ts';

test('a 6-row terminal shows 3 of 6 running tasks, counts the rest and the queued, and the status line', async () => {
  let out = '';
  const reporter = ttyReporter({ write: (s) => (out += s), c: palette(false), columns: () => 60, rows: () => 6, frameMs: 60_000 });
  const ids = Array.from({ length: 10 }, (_, i) => taskId(`t/${i}`));
  reporter.sink({ type: 'plan', plan: listedPlan(ids.map((id) => ({ id, action: 'create', verb: 'create', reasons: ['never ran'] }))) });
  for (const id of ids.slice(0, 6)) reporter.sink({ type: 'task-start', id, verb: 'create', reason: 'never ran', command: 'true' });
  const frame = out.slice(out.lastIndexOf('\x1b[J') + 3).replace(/\d+ms/g, 'T');
  expect(frame).toBe(['⠋ t/0 create T', '⠋ t/1 create T', '⠋ t/2 create T', '… and 3 more running', '[0/10] 6 running · 4 queued · T', ''].join('\n'));
  await reporter.close();
});

test('a long id or line is cut to the width, so no row wraps', async () => {
  let out = '';
  const reporter = ttyReporter({ write: (s) => (out += s), c: palette(false), columns: () => 30, rows: () => 10, frameMs: 60_000 });
  const id = taskId(`kube1/${'x'.repeat(40)}`);
  reporter.sink({ type: 'plan', plan: listedPlan([{ id, action: 'create', verb: 'create', reasons: ['never ran'] }]) });
  reporter.sink({ type: 'task-start', id, verb: 'create', reason: 'never ran', command: undefined });
  const frame = out.slice(out.lastIndexOf('\x1b[J') + 3);
  for (const line of frame.split('\n')) expect([...line].length).toBeLessThan(30);
  await reporter.close();
});
