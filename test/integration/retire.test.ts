// retire: 'stop' — a task the Nodefile no longer declares is stopped and kept in
// place (files and record), found in place when declared again, and destroyed
// only by `destroy`.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const slot = (declared: boolean) => `
  ${declared ? '' : '// '}ng.task('b/rootfs', { outputs: ['b/rootfs'], run: { shell: 'echo unpacked >> unpacks; mkdir -p b && echo root > b/rootfs' }, retire: 'stop' });
  ${declared ? '' : '// '}ng.task('b/service', { after: ['b/rootfs'], outputs: ['b/running'], run: { shell: 'echo up > b/running' }, stop: { shell: 'rm -f b/running; echo stopped >> stops' }, retire: 'stop' });
  ng.task('a/file', { outputs: ['a.txt'], run: { shell: 'echo a > a.txt' } });
`;

test("an orphan with retire: 'stop' is stopped in place, kept, and found in place when declared again", async () => {
  rig.nodefile(slot(true));
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(rig.read('unpacks')).toBe('unpacked\n');

  rig.nodefile(slot(false));
  const plan = await rig.run(['plan']);
  expect(plan.stdout).toMatch(/S b\/service +stop +orphan: no longer in the Nodefile, stopped and kept in place/);
  expect(plan.stdout).not.toMatch(/b\/rootfs/);
  expect(plan.stdout).toContain('Plan: 0 to create, 0 to update, 0 to destroy, 1 to stop and keep; 1 unchanged.\nS stop and keep\n');
  const retired = await rig.run(['apply']);
  expect(retired.code).toBe(0);
  expect(rig.read('stops')).toBe('stopped\n');
  expect(rig.exists('b/running')).toBe(false);
  expect(rig.read('b/rootfs')).toBe('root\n');
  // Retired in place: nothing more to do, run after run.
  expect((await rig.run(['plan', '--detailed-exitcode'])).code).toBe(0);
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(rig.read('stops')).toBe('stopped\n');

  // Declared again: the service starts, the rootfs is found in place (not unpacked again).
  rig.nodefile(slot(true));
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(rig.read('b/running')).toBe('up\n');
  expect(rig.read('unpacks')).toBe('unpacked\n');

  // destroy still destroys it.
  rig.nodefile(slot(false));
  expect((await rig.run(['apply'])).code).toBe(0);
  expect((await rig.run(['destroy', '--yes'])).code).toBe(0);
  expect(rig.exists('b/rootfs')).toBe(false);
  expect(rig.exists('a.txt')).toBe(false);
});

test('an orphan that will not go fails the apply, records no generation, and is tried again by the next', async () => {
  rig.nodefile(`ng.task('old', { run: ['true'], destroy: { shell: 'test -e let-go' } }); ng.task('kept', { run: ['true'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.nodefile(`ng.task('kept', { run: ['true'] });`);
  const refused = await rig.run(['apply']);
  expect(refused.code).toBe(1);
  expect(refused.stdout).toContain('Apply: 0 ran, 1 failed, 0 skipped, 0 canceled, 1 up to date, 0 destroyed');
  expect(refused.stdout).toContain('Failed: old (exit 1)');
  expect((await rig.run(['generations'])).stdout).not.toMatch(/^\*? +2 /m);
  rig.write('let-go', '');
  const gone = await rig.run(['apply']);
  expect(gone.code).toBe(0);
  expect(gone.stdout).toContain('1 destroyed');
});

test("retire must be 'destroy' or 'stop'", async () => {
  rig.nodefile(`ng.task('t', { run: ['true'], retire: 'keep' as never });`);
  const plan = await rig.run(['plan']);
  expect(plan.code).toBe(1);
  expect(plan.stderr).toMatch(/retire/);
});
