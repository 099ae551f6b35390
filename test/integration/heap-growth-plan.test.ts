// A run that observes and plans a large graph has V8 collect as its heap grows from
// before observing (engine.ts, util/gc.ts), whether or not it goes on to execute; a
// run that executes many tasks then switches to the growth for executing. The flag
// holds for the rest of the process, so this file plans a graph just under the
// threshold first (it must not set it), then one at it (it must), then builds a graph
// too small to plan with it but large enough to execute with it. What it saves is
// measured in BENCHMARKS.md, not here.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { applyNodefile, planNodefile } from '../../src/operations.ts';
import { heapPhase } from '../../src/util/gc.ts';
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

test('planning 10,000 tasks collects as the heap grows, and fewer does not; executing 1,000 then switches to its own growth', async () => {
  const small = await planNodefile({ nodefile: rig.nodefile(graph(9_999)), jobs: 4 });
  expect(small.ok && small.value.plan.entries.length).toBe(9_999);
  expect(heapPhase()).toBeUndefined();
  const large = await planNodefile({ nodefile: rig.nodefile(graph(10_000)), jobs: 4 });
  expect(large.ok && large.value.plan.entries.length).toBe(10_000);
  expect(heapPhase()).toBe('planning');
  const built = await applyNodefile({ nodefile: rig.nodefile(graph(1_000)), jobs: 4 });
  expect(built.ok && built.value.ran.length).toBe(1_000);
  expect(heapPhase()).toBe('executing');
});
