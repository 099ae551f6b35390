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
  expect(text).toBe('✖ a failed: exited with code 3\n    $ sh -c x\n    boom\n✖ b canceled\n    $ sleep 9\n✖ c failed\n');
});

test("what a command printed follows its line, as ninja shows it; a function's ctx.log shows as it comes", () => {
  const text = lines([
    { type: 'task-log', id: taskId('fn'), message: 'hello' },
    { type: 'task-done', id: taskId('fn'), outcome: 'ran', durationMs: 1 },
    { type: 'task-done', id: taskId('say'), outcome: 'ran', durationMs: 12, command: 'echo hi', output: 'hi\nthere\n' },
    { type: 'task-done', id: taskId('quiet'), outcome: 'ran', durationMs: 3, outputsChanged: false },
  ]);
  expect(text).toBe('  fn: hello\n✔ fn 1ms\n✔ say 12ms\n    hi\n    there\n✔ quiet 3ms (outputs unchanged)\n');
});
