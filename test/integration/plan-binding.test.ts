// A plan is bound to what it observed (a digest of every task's definition and
// observed hashes) only when it is saved: `plan` without --out returns no
// binding and writes nothing, and apply of a saved plan compares it with the
// present (a stale plan's refusal is in commands.test.ts). What skipping the
// digest saves is the benchmark's to show (a plan at 50,000 tasks).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { applyNodefile } from '../../src/apply.ts';
import { planNodefile } from '../../src/operations.ts';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

test('plan binds only a plan it saves; apply of that plan holds it against the present', async () => {
  rig.write('in.txt', 'one\n');
  const nodefile = rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);

  const shown = await planNodefile({ nodefile });
  expect(shown.ok && shown.value.plan.counts.create).toBe(1);
  expect(shown.ok && shown.value.saved).toBeUndefined();

  const out = path.join(rig.dir, 'plan.json');
  const kept = await planNodefile({ nodefile, out });
  const written = JSON.parse(readFileSync(out, 'utf8')) as { tasks: Record<string, string> };
  expect(kept.ok && kept.value.saved).toEqual(written);
  expect(Object.keys(written.tasks)).toEqual(['copy']);

  const applied = await applyNodefile({ nodefile, planFile: out });
  expect(applied.ok && applied.value.ran).toEqual(['copy']);
  expect(readFileSync(rig.path('out/copy'), 'utf8')).toBe('one\n');

  // The same plan again: the present it was bound to has moved on (copy ran), so it is refused.
  writeFileSync(rig.path('in.txt'), 'two\n');
  const stale = await applyNodefile({ nodefile, planFile: out });
  expect(!stale.ok && stale.error.map((f) => f.reason)).toEqual(['plan-stale']);
  expect(readFileSync(rig.path('out/copy'), 'utf8')).toBe('one\n');
  expect(existsSync(out)).toBe(true);
});
