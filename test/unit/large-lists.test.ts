// Sizes past JavaScript's own limits. Lists as long as a large graph's:
// nothing spreads them into one call's arguments (Math.max(...list),
// push(...list)), which overflows the stack at some 150,000 elements. And a
// state journal longer than the longest string V8 makes (512 MiB).

import { constants } from 'node:buffer';
import { expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import { taskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';
import { listedPlan, type Plan } from '../../src/plan/plan.ts';
import { palette } from '../../src/report/color.ts';
import { PLAN_CHUNK, renderPlan, writePlan } from '../../src/report/plan-view.ts';
import { decodeJournal, encodeLine } from '../../src/state/index.ts';

const MANY = 200_000;

/** The plan of a first run of MANY tasks: each to create, never ran. */
function firstPlan(): Plan {
  const entries = Array.from({ length: MANY }, (_, i) => ({ id: taskId(`t/${i}`), action: 'create' as const, verb: 'create', reasons: ['never ran'] }));
  return listedPlan(entries);
}

test('a first plan of 200,000 tasks renders, one line a task, the summary and the legend', () => {
  const plan = firstPlan();
  const lines = renderPlan(plan, palette(false)).split('\n');
  expect(lines).toHaveLength(MANY + 2);
  expect(lines.at(-1)).toBe('+ create');
  // Ids padded to the longest (t/199999), verbs to theirs.
  expect(lines[0]).toBe('  + t/0       create  never ran');
});

test('a first plan of 200,000 tasks is written in pieces, never whole: their text is the rendered plan', () => {
  const plan = firstPlan();
  const pieces: string[] = [];
  writePlan(plan, palette(false), (text) => pieces.push(text));
  const longestLine = '  + t/199999  create  never ran\n'.length;
  expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(PLAN_CHUNK + longestLine);
  expect(pieces.length).toBeGreaterThan(50);
  expect(pieces.join('')).toBe(`${renderPlan(plan, palette(false))}\n`);
});

test('the closure of a task that comes after 200,000 others holds all of them', () => {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  const ng = builder.api();
  const refs = Array.from({ length: MANY }, (_, i) => ng.task(`t/${i}`, { run: ['true'] }));
  ng.task('last', { after: refs, run: ['true'] });
  const graph = analyze(builder.declarations());
  if (!graph.ok) throw new Error(JSON.stringify(graph.error).slice(0, 300));
  expect(graph.value.closure([taskId('last')]).size).toBe(MANY + 1);
});

