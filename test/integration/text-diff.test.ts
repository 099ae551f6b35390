// plan --diff and explain show a small text file input's change line by line,
// against the text it was applied with (the copy the generations keep).

import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

test('a changed text file input as a unified diff in plan --diff, plan --diff --json and explain; not for binary files, nor without --diff', async () => {
  rig.write('config.toml', 'a = 1\nlevel = "info"\nc = 3\n');
  rig.write('blob.bin', 'x\0y');
  rig.nodefile(`ng.task('conf', { inputs: { config: ng.file('config.toml'), blob: ng.file('blob.bin') }, run: ['true'] });`);
  await rig.run(['apply']);
  rig.write('config.toml', 'a = 1\nlevel = "debug"\nc = 3\n');
  rig.write('blob.bin', 'x\0z');

  const diff = ['--- config.toml (applied)', '+++ config.toml (now)', '@@ -1,3 +1,3 @@', ' a = 1', '-level = "info"', '+level = "debug"', ' c = 3'];
  const plan = await rig.run(['plan', '--diff']);
  expect(plan.stdout.replace(/[0-9a-f]{8}→[0-9a-f]{8}/g, 'H→H')).toBe(
    ['  ~ conf  update  input config changed H→H; input blob changed H→H', ...diff.map((l) => `      ${l}`), 'Plan: 0 to create, 1 to update, 0 to destroy; 0 unchanged.', '~ update', ''].join('\n'),
  );
  expect((await rig.run(['plan'])).stdout).not.toContain('---');

  const json = JSON.parse((await rig.run(['plan', '--diff', '--json'])).stdout) as { entries: { reasonDetails: { input: string; diff?: string }[] }[] };
  valid('plan', json);
  expect(json.entries[0]!.reasonDetails.map((d) => [d.input, d.diff])).toEqual([
    ['config', `${diff.join('\n')}\n`],
    ['blob', undefined],
  ]);

  valid('explain', JSON.parse((await rig.run(['explain', 'conf', '--json'])).stdout));
  const explain = await rig.run(['explain', 'conf']);
  expect(explain.stdout.replace(/[0-9a-f]{8}→[0-9a-f]{8}/g, 'H→H')).toContain(
    ['  because input config changed H→H', ...diff.map((l) => `      ${l}`), '  because input blob changed H→H', ''].join('\n'),
  );
});
