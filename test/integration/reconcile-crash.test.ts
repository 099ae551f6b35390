// A rollback undoes what is there, not only what the journal records: kill -9
// of an atomic apply between a task's action and its record (a failpoint), and
// at random instants while each task's output is written well before its
// record, with tasks that only the new Nodefile declares. After the recovering
// run the project's files are exactly those of one generation — the old one,
// or with --continue the new one — with nothing extra.
//
// NODEGRAPH_CRASH_CAMPAIGN=1 (CI sets it) runs the long random campaign.

import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';
import { describeTree } from '../support/tree.ts';

const rigs: Rig[] = [];
afterEach(() => {
  for (const rig of rigs.splice(0)) rig.cleanup();
});

/**
 * Version 'a' renders three files; 'b' renders them differently and adds three
 * tasks of its own. Each action writes its output first and then waits, so a
 * kill often falls between the effect and its record.
 */
const nodefile = (version: 'a' | 'b'): string => `
  const write = (file, text) => async (ctx) => {
    process.getBuiltinModule('node:fs').writeFileSync(ng.dir + '/' + file, text);
    await ctx.exec(['sleep', '0.08']);
  };
  let last;
  for (let i = 0; i < 3; i++) {
    last = ng.task('render/' + i, { inputs: { v: ng.value('${version}'), ...(last ? { up: last } : {}) }, outputs: ['out/' + i], run: write('out/' + i, '${version} ' + i) });
  }
  ${version === 'b' ? `for (let i = 0; i < 3; i++) last = ng.task('extra/' + i, { inputs: { up: last }, outputs: ['extra/' + i], run: write('extra/' + i, 'only in b ' + i) });` : ''}
  ng.task('health', { inputs: { last }, run: () => {}, check: () => true, health: { within: '2s' } });
`;

/** The project's files (folders aside: an output's folder stays, as make's and ninja's do), without the state folder. */
function files(rig: Rig): Record<string, string> {
  const tree = describeTree(rig.dir);
  return Object.fromEntries(Object.entries(tree).filter(([rel, what]) => !what.startsWith('dir ') && !rel.startsWith('.nodegraph/')));
}

interface Project {
  readonly rig: Rig;
  /** How long a whole switch took here, start to exit: where the random kills aim. */
  readonly switchMs: number;
  /** What the project holds once each version is applied whole. */
  readonly at: Record<'a' | 'b', Record<string, string>>;
}

async function project(): Promise<Project> {
  const rig = new Rig('nodegraph-reconcile-');
  rigs.push(rig);
  const at = {} as Record<'a' | 'b', Record<string, string>>;
  let switchMs = 0;
  for (const version of ['b', 'a'] as const) {
    rig.nodefile(nodefile(version));
    const started = Date.now();
    const applied = await rig.run(['apply', '--atomic']);
    switchMs = Date.now() - started;
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    at[version] = files(rig);
  }
  expect(Object.keys(at.b).filter((p) => p.startsWith('extra/'))).toEqual(['extra/0', 'extra/1', 'extra/2']);
  expect(Object.keys(at.a).filter((p) => p.startsWith('extra/'))).toEqual([]);
  return { rig, at, switchMs };
}

/** The version the current generation's Nodefile is. */
const currentVersion = (rig: Rig): 'a' | 'b' => (readFileSync(rig.path('Nodefile.ts'), 'utf8').includes("ng.value('b')") ? 'b' : 'a');

async function expectWhole(p: Project, version: 'a' | 'b'): Promise<void> {
  expect(currentVersion(p.rig)).toBe(version);
  expect(files(p.rig)).toEqual(p.at[version]);
  expect(p.rig.exists('.nodegraph/transaction.json')).toBe(false);
  expect(p.rig.exists('.nodegraph/transaction')).toBe(false);
  const plan = await p.rig.run(['plan', '--detailed-exitcode']);
  expect(plan.stderr).toBe('');
  expect(plan.code).toBe(0);
}

describe('kill -9 between a task action and its record', () => {
  const cases: { step: string; continue: boolean; ends: 'a' | 'b' }[] = [
    // A task only the new Nodefile declares wrote its output; nothing records it but its intent.
    { step: 'ran:extra/1', continue: false, ends: 'a' },
    { step: 'ran:extra/1', continue: true, ends: 'b' },
    // A task the old generation has too rewrote its output.
    { step: 'ran:render/1', continue: false, ends: 'a' },
  ];
  test.each(cases)('at $step (continue: $continue) the project holds exactly generation $ends', async ({ step, continue: forward, ends }) => {
    const p = await project();
    p.rig.nodefile(nodefile('b'));
    const killed = await p.rig.run(['apply', '--atomic'], { NODEGRAPH_FAILPOINT: step });
    expect(killed.signal).toBe('SIGKILL');
    // The effect is there and no record says so.
    if (step === 'ran:extra/1') expect(p.rig.read('extra/1')).toBe('only in b 1');
    const recovered = await p.rig.run(forward ? ['apply', '--continue'] : ['apply']);
    expect(recovered.stderr).toBe('');
    expect(recovered.code).toBe(0);
    await expectWhole(p, ends);
  });
});

const campaign = process.env['NODEGRAPH_CRASH_CAMPAIGN'] === '1';

test(`kill -9 at ${campaign ? 60 : 6} random instants, recovering by apply and apply --continue in turn: exactly one generation's files each time`, async () => {
  const trials = campaign ? 60 : 6;
  const lanes = 2;
  const counts = { rolledBack: 0, continued: 0, plain: 0 };
  const lane = async (index: number): Promise<void> => {
    const p = await project();
    let at: 'a' | 'b' = 'a';
    for (let trial = index; trial < trials; trial += lanes) {
      const next: 'a' | 'b' = at === 'a' ? 'b' : 'a';
      p.rig.nodefile(nodefile(next));
      const child = p.rig.spawn(['apply', '--atomic']);
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      // Anywhere from start-up to a little past the end of a switch as long as the last one took here.
      const delay = Math.random() * p.switchMs * 1.1;
      await new Promise((resolve) => setTimeout(resolve, delay));
      child.kill('SIGKILL');
      await exited;
      const forward = trial % 4 >= 2;
      const pending = p.rig.exists('.nodegraph/transaction.json');
      // --continue needs an interrupted apply; with none (killed before it began, or after it committed), apply.
      const recovered = await p.rig.run(forward && pending ? ['apply', '--continue'] : ['apply']);
      expect(recovered.stderr).toBe('');
      expect(recovered.code).toBe(0);
      at = currentVersion(p.rig);
      // Continued, or never begun: the new one; rolled back: the old one; either way whole.
      if (forward) expect(at).toBe(next);
      await expectWhole(p, at);
      if (forward && pending) counts.continued++;
      else if (pending && at !== next) counts.rolledBack++;
      else counts.plain++;
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  expect(counts.rolledBack + counts.continued + counts.plain).toBe(trials);
  console.log(`random kills: ${trials} trials, ${counts.rolledBack} rolled back, ${counts.continued} continued, ${counts.plain} found no interrupted apply`);
}, 900_000);
