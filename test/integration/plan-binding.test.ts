// A plan is bound to what it observed (a digest of every task's definition and
// observed hashes) only when it is saved: `plan` without --out returns no
// binding and writes nothing, and apply of a saved plan compares it with the
// present (a stale plan's refusal is in commands.test.ts). What skipping the
// digest saves is the benchmark's to show (a plan at 50,000 tasks).

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
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

test('plan --out writes over no folder, no state, no Nodefile, no output a task writes and no file it did not write: one usage error, nothing changed', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.write('out/plans/.keep', '');
  const files = ['Nodefile.ts', 'in.txt', 'out/copy', '.nodegraph/state.jsonl'];
  const before = files.map((f) => rig.read(f));
  const refused: [string, string][] = [
    ['out/plans', 'is a folder'],
    ['Nodefile.ts', 'is the Nodefile'],
    ['.nodegraph/plan.json', "is inside nodegraph's state folder"],
    ['in.txt', 'exists and is not a saved plan nodegraph wrote: remove it, or choose another path'],
    ['missing/plan.json', 'its folder'],
  ];
  for (const [file, why] of refused) {
    const plan = await rig.run(['plan', '--out', file]);
    expect(plan.code, file).toBe(1);
    expect(plan.stderr, file).toContain(`error[usage]: --out ${file}: `);
    expect(plan.stderr, file).toContain(why);
  }
  // A path a task writes, once it is gone: the plan would be written over by the task, or over its output.
  rmSync(rig.path('out/copy'));
  const over = await rig.run(['plan', '--out', 'out/copy']);
  expect(over.code).toBe(1);
  expect(over.stderr).toBe('error[file-write-failed]: could not write out/copy: a task of the graph writes there\n');
  expect(existsSync(rig.path('out/copy'))).toBe(false);
  expect(files.filter((f) => f !== 'out/copy').map((f) => rig.read(f))).toEqual(before.filter((_, i) => files[i] !== 'out/copy'));
  // A saved plan is written again over the one before.
  expect((await rig.run(['plan', '--out', 'plan.json'])).code).toBe(0);
  expect((await rig.run(['plan', '--out', 'plan.json'])).code).toBe(0);
});

test('plan --out on a full disk: one error, and the plan saved there before is left whole', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
  mkdirSync(rig.path('full'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', rig.path('full')]);
  try {
    expect((await rig.run(['plan', '--out', 'full/plan.json'])).code).toBe(0);
    const before = readFileSync(rig.path('full/plan.json'));
    writeFileSync(rig.path('full/filler'), Buffer.alloc(60 * 1024));
    // A plan of many tasks: more than the page the one before takes.
    rig.nodefile(`for (let i = 0; i < 60; i++) ng.task('copy' + i, { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy' + i], run: ['cp', 'in.txt', 'out/copy' + i] });`);
    const full = await rig.run(['plan', '--out', 'full/plan.json']);
    expect(full.code).toBe(1);
    expect(full.stderr).toMatch(/^error\[file-write-failed\]: could not write full\/plan\.json: ENOSPC: no space left on device/);
    expect(readFileSync(rig.path('full/plan.json')).equals(before)).toBe(true);
    expect(readdirSync(rig.path('full')).sort()).toEqual(['filler', 'plan.json']);
  } finally {
    execFileSync('umount', [rig.path('full')]);
  }
});
