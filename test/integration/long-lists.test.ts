// Lists as long as a large graph's, checked at a few thousand under a small
// stack: nothing spreads a list into one call's arguments (Math.max(...list),
// push(...list)) and nothing recurses once a task, so neither overflows at
// any length. test/support/long-lists.ts runs in its own Node with 64 KiB of
// stack (Node itself needs some 58 to start), where a spread of some 8,000 overflows.

import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { expect, test } from 'vitest';
import { repo } from '../support/rig.ts';

test('a plan, a wide graph and a chain, each longer than a spread can be on the stack, render, analyse and close', () => {
  const run = spawnSync(process.execPath, ['--stack-size=64', path.join(repo, 'test/support/long-lists.ts')], { encoding: 'utf8' });
  const [said, result] = run.stdout.split('\n');
  expect(said, `Node did not start with 64 KiB of stack: ${run.stderr}`).toMatch(/^\d+$/);
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  const many = Number(said);
  const seen = JSON.parse(result!) as Record<string, unknown>;
  // A few thousand: the stack is small, and so the test.
  expect(many).toBeGreaterThan(1000);
  expect(many).toBeLessThanOrEqual(16_384);
  const id = `t/${many - 1}`;
  expect(seen).toEqual({
    lines: many + 2,
    // Ids padded to the longest, verbs to theirs; the summary, then the legend.
    first: `  + ${'t/0'.padEnd(id.length)}  create  never ran`,
    last: '+ create',
    written: true,
    wide: many + 1,
    chain: many,
    ordered: 2 * many + 1,
  });
});
