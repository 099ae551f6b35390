// A run that observes and plans a large graph has V8 collect as its heap grows
// (util/gc.ts; engine.ts). The flag holds for the rest of the process, so this file
// goes through one sequence: runs too small for it first (they must not set it), then
// a plan at the threshold, and last, a large graph whose observing allocates, which
// collects as it goes.
// What it saves is measured in BENCHMARKS.md, not here.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { applyNodefile, planNodefile } from '../../src/operations.ts';
import { collectGarbage, collectIfGrown, collections, heapPhase } from '../../src/util/gc.ts';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const graph = (n: number): string => `
  const { writeFileSync } = process.getBuiltinModule('node:fs');
  for (let i = 0; i < ${n}; i++) {
    ng.task('write/' + i, { outputs: ['out/' + i], run: (ctx) => writeFileSync(ctx.cwd + '/out/' + ctx.id.slice(6), ctx.id) });
  }
`;

test('V8 collects as the heap grows from a plan of 10,000 tasks, not before', async () => {
  const small = await applyNodefile({ nodefile: rig.nodefile(graph(999)), jobs: 4 });
  expect(small.ok && small.value.ran.length).toBe(999);
  expect(heapPhase()).toBeUndefined();
  // What counts for a plan is how many tasks it observes.
  const under = await planNodefile({ nodefile: rig.nodefile(graph(9_999)), jobs: 4 });
  expect(under.ok && under.value.plan.size).toBe(9_999);
  expect(heapPhase()).toBeUndefined();
  const at = await planNodefile({ nodefile: rig.nodefile(graph(10_000)), jobs: 4 });
  expect(at.ok && at.value.plan.size).toBe(10_000);
  expect(heapPhase()).toBe('planning');
});

test('a collection when the heap has grown by so much since the last, and only then', () => {
  collectGarbage();
  const before = collections();
  expect(collectIfGrown(4 << 20)).toBe(false);
  // 8 MiB kept alive: the heap has grown by that.
  const kept = Array.from({ length: 8 }, () => new Array<number>(128 * 1024).fill(1.5));
  expect(collectIfGrown(4 << 20)).toBe(true);
  expect(kept.length).toBe(8);
  expect(collectIfGrown(4 << 20)).toBe(false);
  expect(collections() - before).toBe(1);
});

test('a large graph is collected while it is observed, as its heap grows', async () => {
  // Each task's value input is hashed as it is observed: about 7 KB of serialised text a
  // task, garbage at once, some 70 MB for the graph, where observing looks at the heap
  // every 1,024 tasks and collects once it has grown by 4 MiB.
  const valued = `
    const { writeFileSync } = process.getBuiltinModule('node:fs');
    const big = Array.from({ length: 1000 }, (_, i) => 'v' + i);
    for (let i = 0; i < 10000; i++) {
      ng.task('write/' + i, { inputs: { v: ng.value([i, ...big]) }, outputs: ['out/' + i], run: (ctx) => writeFileSync(ctx.cwd + '/out/' + ctx.id.slice(6), ctx.id) });
    }
  `;
  const before = collections();
  const planned = await planNodefile({ nodefile: rig.nodefile(valued), jobs: 4 });
  expect(planned.ok && planned.value.plan.size).toBe(10_000);
  expect(heapPhase()).toBe('planning');
  // One as the session starts (collectAsHeapGrows), the rest while observing.
  expect(collections() - before).toBeGreaterThanOrEqual(3);
});

