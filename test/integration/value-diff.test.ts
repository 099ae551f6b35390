// A changed value input is shown key by key, as terraform shows an attribute;
// an env input or a value marked sensitive only says that it changed.

import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const graph = (settings: string, secret: string): string =>
  rig.nodefile(`
    ng.task('conf', {
      inputs: { settings: ng.value(${settings}), password: ng.value('${secret}', { sensitive: true }), token: ng.env('TOKEN') },
      run: ['true'],
    });
  `);

test('plan, explain and plan --json say what changed in a value, key by key; secrets stay out of sight and out of the state', async () => {
  graph(`{ logLevel: 'info', mirrors: { 'docker.io': ['a'] }, pods: 110, old: true }`, 'hunter2');
  await rig.run(['apply'], { TOKEN: 'first-token' });
  graph(`{ logLevel: 'debug', mirrors: { 'docker.io': ['a', 'b'] }, pods: 111, added: 1 }`, 'hunter3');
  const env = { TOKEN: 'second-token' };

  const plan = await rig.run(['plan'], env);
  expect(plan.stdout).toBe(
    '  ~ conf  update  input settings changed: added: (none) → 1, logLevel: "info" → "debug", mirrors["docker.io"]: ["a"] → ["a","b"] and 2 more; input password changed (sensitive); input token changed (sensitive) (all: nodegraph explain conf)\n' +
      'Plan: 0 to create, 1 to update, 0 to destroy; 0 unchanged.\n' +
      '~ update\n',
  );

  const json = JSON.parse((await rig.run(['plan', '--json'], env)).stdout) as { entries: { reasonDetails: unknown[] }[] };
  expect(json.entries[0]!.reasonDetails).toEqual([
    {
      kind: 'input-changed',
      input: 'settings',
      from: expect.stringMatching(/^[0-9a-f]{8}$/),
      to: expect.stringMatching(/^[0-9a-f]{8}$/),
      changes: [
        { path: 'added', to: '1' },
        { path: 'logLevel', from: '"info"', to: '"debug"' },
        { path: 'mirrors["docker.io"]', from: '["a"]', to: '["a","b"]' },
        { path: 'old', from: 'true' },
        { path: 'pods', from: '110', to: '111' },
      ],
    },
    { kind: 'input-changed', input: 'password', sensitive: true },
    { kind: 'input-changed', input: 'token', sensitive: true },
  ]);

  const explain = await rig.run(['explain', 'conf'], env);
  expect(explain.stdout).toContain(
    [
      '',
      '  because input settings changed:',
      '    added: (none) → 1',
      '    logLevel: "info" → "debug"',
      '    mirrors["docker.io"]: ["a"] → ["a","b"]',
      '    old: true → (none)',
      '    pods: 110 → 111',
      '  because input password changed (sensitive)',
      '',
    ].join('\n'),
  );
  for (const output of [plan.stdout, explain.stdout, JSON.stringify(json), readFileSync(rig.path('.nodegraph/state.jsonl'), 'utf8')]) {
    expect(output).not.toMatch(/hunter|first-token|second-token/);
  }
});

test('a value recorded before it could be compared, or too large to keep, still says that it changed', async () => {
  const big = `'${'x'.repeat(5000)}'`;
  graph(`{ blob: ${big} }`, 's');
  await rig.run(['apply']);
  graph(`{ blob: ${big}.toUpperCase() }`, 's');
  expect((await rig.run(['plan'])).stdout).toMatch(/^ {2}~ conf {2}update {2}input settings changed [0-9a-f]{8}→[0-9a-f]{8}\n/);
});
