// kill -9 of an atomic apply at every step boundary (a failpoint makes
// nodegraph SIGKILL itself right after recording the step), and at random
// instants; then `apply`: the machine ends at one generation, whole — the
// previous one unless the change had been proven healthy (or --continue
// finishes it) — with preserved files byte-identical, the state valid and
// nothing left to do.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, test } from 'vitest';
import { readManifest } from '../support/generations.ts';
import { Rig } from '../support/rig.ts';
import { describeTree, makeSharedTree } from '../support/tree.ts';

const rigs: Rig[] = [];
afterEach(() => {
  for (const rig of rigs.splice(0)) rig.cleanup();
});

/** Five tasks that render the settings, one that rewrites the preserved identity in version 'b', a health check. */
function project(): Rig {
  const rig = new Rig('nodegraph-crash-');
  rigs.push(rig);
  makeSharedTree(rig.path('shared'));
  rig.nodefile(`
  const fs = process.getBuiltinModule('node:fs');
  const s = JSON.parse(fs.readFileSync(ng.dir + '/settings.json', 'utf8'));
  ng.preserve('shared');
  const settings = ng.task('settings', { inputs: { file: ng.file('settings.json') }, run: () => {} });
  let last = settings;
  for (let i = 0; i < 5; i++) {
    last = ng.task('render/' + i, {
      inputs: { v: ng.value(s.version), up: last },
      outputs: ['out/' + i],
      run: async (ctx) => { await ctx.exec(['sleep', '0.05']); await ctx.writeIfChanged('out/' + i, s.version + ' ' + i); },
    });
  }
  ng.task('identity', {
    inputs: { v: ng.value(s.version) },
    run: () => { if (s.version !== 'a') fs.writeFileSync(ng.dir + '/shared/pki/client.pem', 'identity-' + s.version + '\\n'); },
  });
  ng.task('breaks', { inputs: { fail: ng.value(s.fail), last }, run: () => { if (s.fail) throw new Error('broken on purpose'); } });
  ng.task('health', { inputs: { last }, run: () => {}, check: () => fs.existsSync(ng.dir + '/out/4'), health: { within: '2s', stable: '300ms' } });
  `);
  return rig;
}

const setSettings = (rig: Rig, version: string, fail = false): void => writeFileSync(rig.path('settings.json'), `${JSON.stringify({ version, fail })}\n`);

/** What the machine holds, as a test compares it. */
function machine(rig: Rig): { outputs: string[]; shared: Record<string, string> } {
  return { outputs: [0, 1, 2, 3, 4].map((i) => (existsSync(rig.path(`out/${i}`)) ? rig.read(`out/${i}`) : 'missing')), shared: describeTree(rig.path('shared')) };
}

const rendered = (version: string): string[] => [0, 1, 2, 3, 4].map((i) => `${version} ${i}`);

/** The machine is whole at the generation `version` describes, and a plan finds nothing to do. */
async function expectAt(rig: Rig, version: string): Promise<void> {
  expect(JSON.parse(rig.read('settings.json')).version).toBe(version);
  expect(machine(rig).outputs).toEqual(rendered(version));
  expect(existsSync(rig.path('.nodegraph/transaction.json'))).toBe(false);
  const current = Number(rig.read('.nodegraph/generations/current').split(' ')[0]);
  const manifest = readManifest(rig.path('.nodegraph'), current);
  const settingsSha = createHash('sha256').update(readFileSync(rig.path('settings.json'))).digest('hex');
  expect(manifest.files.find((f) => f.path.endsWith('/settings.json'))?.sha256).toBe(settingsSha);
  const plan = await rig.run(['plan', '--detailed-exitcode']);
  expect(plan.stderr).toBe('');
  expect(plan.code).toBe(0);
}

describe('kill -9 at every step boundary of an atomic apply, then apply', () => {
  // Where each crash leaves the machine once the next apply is done: before the change was
  // proven healthy, at the previous generation; once its commit is recorded, at the new one.
  const cases: { step: string; fail?: boolean; continue?: boolean; ends: 'a' | 'b' }[] = [
    { step: 'prepare', ends: 'b' }, // nothing ran and no transaction was recorded: the next apply is an ordinary one
    { step: 'apply', ends: 'a' },
    { step: 'health', ends: 'a' },
    { step: 'commit', ends: 'b' },
    { step: 'committed', ends: 'b' },
    { step: 'rollback', fail: true, ends: 'a' },
    { step: 'rolled-back', fail: true, ends: 'a' },
    { step: 'apply', continue: true, ends: 'b' },
    { step: 'health', continue: true, ends: 'b' },
  ];
  test.each(cases)('at $step (continue: $continue) the machine ends at $ends', async ({ step, fail, continue: forward, ends }) => {
    const rig = project();
    setSettings(rig, 'a');
    expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
    const before = machine(rig);
    setSettings(rig, 'b', fail === true);
    const killed = await rig.run(['apply', '--atomic'], { NODEGRAPH_FAILPOINT: step });
    expect(killed.signal).toBe('SIGKILL');
    const recovered = await rig.run(forward === true ? ['apply', '--continue'] : ['apply']);
    expect(recovered.stderr).toBe('');
    expect(recovered.code).toBe(0);
    if (ends === 'a') {
      await expectAt(rig, 'a');
      expect(machine(rig).shared).toEqual(before.shared);
    } else {
      // A continued change whose settings had `fail` would fail again: only the healthy one is continued here.
      await expectAt(rig, 'b');
      expect(rig.read('shared/pki/client.pem')).toBe('identity-b\n');
    }
  });
});

test('an interrupted apply whose earlier generation is damaged is not rolled back half: nothing is undone, and --continue finishes it', async () => {
  const rig = project();
  setSettings(rig, 'a');
  expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
  setSettings(rig, 'b');
  expect((await rig.run(['apply', '--atomic'], { NODEGRAPH_FAILPOINT: 'health' })).signal).toBe('SIGKILL');
  const left = machine(rig);
  const manifest = rig.path('.nodegraph/generations/1.json');
  writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('Nodefile.ts', 'Nodefilf.ts'));
  const refused = await rig.run(['apply']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('generation 1 is damaged: ');
  expect(refused.stderr).toContain('its manifest does not match its digest: nothing was undone (`nodegraph apply --continue` finishes the apply instead)');
  expect(machine(rig)).toEqual(left);
  expect((await rig.run(['apply', '--continue'])).code).toBe(0);
  expect(machine(rig).outputs).toEqual(rendered('b'));
});

// NODEGRAPH_CRASH_CAMPAIGN=1 (CI sets it) runs the long campaign.
const campaign = process.env['NODEGRAPH_CRASH_CAMPAIGN'] === '1';

test(`kill -9 at ${campaign ? 50 : 9} random instants of atomic applies: each time one whole generation, nothing half-applied`, async () => {
  const trials = campaign ? 50 : 9;
  const lanes = 3;
  const seen = { a: 0, b: 0 };
  // Each lane is its own project, switching between 'a' and 'b' one killed apply after another.
  const lane = async (index: number): Promise<void> => {
    const rig = project();
    setSettings(rig, 'a');
    expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
    let at = 'a';
    for (let trial = index; trial < trials; trial += lanes) {
      const before = machine(rig);
      const next = at === 'a' ? 'b' : 'a';
      setSettings(rig, next);
      const child = rig.spawn(['apply', '--atomic']);
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      // Node starts in about 0.1 s and the apply takes about 1 s: the kill lands anywhere in it, or after.
      await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 1400));
      child.kill('SIGKILL');
      await exited;
      const recovered = await rig.run(['apply']);
      expect(recovered.stderr).toBe('');
      expect(recovered.code).toBe(0);
      at = JSON.parse(rig.read('settings.json')).version;
      await expectAt(rig, at);
      if (at !== next) expect(machine(rig).shared).toEqual(before.shared);
      seen[at as 'a' | 'b']++;
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  expect(seen.a + seen.b).toBe(trials);
}, 400_000);
