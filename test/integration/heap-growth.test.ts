// A run that executes many tasks has V8 collect as its heap grows (util/gc.ts,
// executor.ts): the flag holds for the rest of the process, so this file runs a
// small build first (it must not set it) and then one of 1,000 tasks (it must).
// What it saves is measured in BENCHMARKS.md, not here.

import { rmSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { applyNodefile } from '../../src/operations.ts';
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

test('a build of fewer than 1,000 tasks leaves V8 its own heap growth; one of 1,000 has it collect as the heap grows', async () => {
  const small = await applyNodefile({ nodefile: rig.nodefile(graph(999)), jobs: 4 });
  expect(small.ok && small.value.ran.length).toBe(999);
  expect(heapPhase()).toBeUndefined();
  // A second run of the same 999 and one more runs only that one: what counts is what runs.
  const one = await applyNodefile({ nodefile: rig.nodefile(graph(1000)), jobs: 4 });
  expect(one.ok && one.value.ran.length).toBe(1);
  expect(heapPhase()).toBeUndefined();
  rmSync(rig.path('out'), { recursive: true });
  const large = await applyNodefile({ nodefile: rig.nodefile(graph(1000)), jobs: 4 });
  expect(large.ok && large.value.ran.length).toBe(1000);
  expect(heapPhase()).toBe('executing');
});
