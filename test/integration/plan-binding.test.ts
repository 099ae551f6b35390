// A plan is bound to what it observed (a digest of every task's definition and
// observed hashes) only when it is saved: `plan` without --out does not pay
// for digesting 50,000 tasks it will not write. bindPlan is wrapped to count
// its calls; every call still reaches the real one.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import * as saved from '../../src/plan/saved.ts';
import { applyNodefile } from '../../src/apply.ts';
import { planNodefile } from '../../src/operations.ts';
import { Rig } from '../support/rig.ts';

vi.mock('../../src/plan/saved.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/plan/saved.ts')>();
  return { ...real, bindPlan: vi.fn(real.bindPlan) };
});
const binds = vi.mocked(saved.bindPlan);

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
  binds.mockClear();
});
afterEach(() => rig.cleanup());

test('plan binds only a plan it saves; apply of that plan binds the present to compare', async () => {
  rig.write('in.txt', 'one\n');
  const nodefile = rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);

  const shown = await planNodefile({ nodefile });
  expect(shown.ok && shown.value.plan.counts.create).toBe(1);
  expect(shown.ok && shown.value.saved).toBeUndefined();
  expect(binds).not.toHaveBeenCalled();

  const out = path.join(rig.dir, 'plan.json');
  const kept = await planNodefile({ nodefile, out });
  expect(binds).toHaveBeenCalledTimes(1);
  expect(existsSync(out)).toBe(true);
  expect(kept.ok && kept.value.saved).toEqual(JSON.parse(readFileSync(out, 'utf8')));

  const applied = await applyNodefile({ nodefile, planFile: out });
  expect(applied.ok && applied.value.ran).toEqual(['copy']);
  expect(binds).toHaveBeenCalledTimes(2);
});
