// Every command that runs tasks keeps a failed task's whole output under
// <state>/logs/tasks/ and ends with the same recap as apply, naming the file:
// stop, destroy, watch and rollback as much as apply (live-view.test.ts).

import { rmSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { collect, Rig, until } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
  // Each action prints 30 lines (more than the 20 a terminal shows) and fails while its marker file exists.
  const loud = (what: string, marker: string, code: number): string =>
    `{ shell: 'i=1; while [ $i -le 30 ]; do echo "${what} $i"; i=$((i+1)); done; test ! -e ${marker} || exit ${code}' }`;
  rig.nodefile(`  ng.task('svc', {
    inputs: { v: ng.env('V') },
    run: ${loud('run', 'fail-run', 1)},
    stop: ${loud('stop', 'fail-stop', 3)},
    destroy: ${loud('destroy', 'fail-destroy', 4)},
  });`);
});
afterEach(() => rig.cleanup());

const lines = (what: string): string => Array.from({ length: 30 }, (_, i) => `${what} ${i + 1}\n`).join('');
const logs = '.nodegraph/logs/tasks';

test('stop and destroy keep a failed task log, say where, and end with the recap; so does their JSON', async () => {
  expect((await rig.run(['apply'], { V: 'a' })).code).toBe(0);
  rig.write('fail-stop', '');
  const stopped = await rig.run(['stop']);
  expect(stopped.code).toBe(1);
  expect(stopped.stdout).toContain(`    … 10 earlier lines in ${logs}/stop-svc.log\n`);
  expect(stopped.stdout.split('\n').slice(-2)).toEqual([`Failed: svc (exit 3); output in ${logs}/stop-svc.log`, '']);
  expect(rig.read(`${logs}/stop-svc.log`)).toBe(lines('stop'));

  rig.write('fail-destroy', '');
  rig.write('fail-stop', '');
  const json = await rig.run(['destroy', '--yes', '--json']);
  expect(json.code).toBe(1);
  const events = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const log = rig.path(logs, 'destroy-svc.log');
  expect(events.find((e) => e['type'] === 'destroy-done')).toMatchObject({ outcome: 'failed', action: 'destroy', exitCode: 3, log });
  expect(events.find((e) => e['type'] === 'summary')).toMatchObject({ failures: [{ id: 'svc', outcome: 'failed', what: 'exit 3', exitCode: 3, log, skipped: [] }] });

  rmSync(rig.path('fail-stop'));
  const destroyed = await rig.run(['destroy', '--yes']);
  expect(destroyed.code).toBe(1);
  expect(destroyed.stdout.split('\n').slice(-2)).toEqual([`Failed: svc (exit 4); output in ${logs}/destroy-svc.log`, '']);
  // The stop commands' output, then the destroy commands', as they ran.
  expect(rig.read(`${logs}/destroy-svc.log`)).toBe(lines('stop') + lines('destroy'));
});

test('watch keeps a failed task log and ends each run with the recap', async () => {
  rig.write('fail-run', '');
  const child = rig.spawn(['watch', '--debounce', '50'], { V: 'a' });
  const done = collect(child);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  await until(() => stdout.includes('watching for changes'));
  child.kill('SIGINT');
  const result = await done;
  expect(result.code).toBe(130);
  expect(stdout).toContain(`    … 10 earlier lines in ${logs}/svc.log\n`);
  expect(stdout).toContain(`\nFailed: svc (exit 1); output in ${logs}/svc.log\nwatching for changes`);
  expect(rig.read(`${logs}/svc.log`)).toBe(lines('run'));
});

test('rollback keeps a failed task log and ends with the recap', async () => {
  expect((await rig.run(['apply'], { V: 'a' })).code).toBe(0);
  expect((await rig.run(['apply'], { V: 'b' })).code).toBe(0);
  rig.write('fail-run', '');
  const back = await rig.run(['rollback', '--no-atomic'], { V: 'b' });
  expect(back.code).toBe(1);
  expect(back.stdout).toContain(`    … 10 earlier lines in ${logs}/svc.log\n`);
  expect(back.stdout.split('\n').slice(-2)).toEqual([`Failed: svc (exit 1); output in ${logs}/svc.log`, '']);
  expect(rig.read(`${logs}/svc.log`)).toBe(lines('run'));
});
