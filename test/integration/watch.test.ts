// `nodegraph watch`: applies, then applies again when an input changes;
// Ctrl-C ends it with 130 and releases the lock.

import { existsSync, readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { collect, Rig, until } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());


test('re-applies on an input change and stops on Ctrl-C', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
  const child = rig.spawn(['watch', '--debounce', '50']);
  const done = collect(child);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  await until(() => stdout.includes('watching for changes'));
  expect(readFileSync(rig.path('out/copy'), 'utf8')).toBe('one\n');
  rig.write('in.txt', 'two\n');
  await until(() => existsSync(rig.path('out/copy')) && readFileSync(rig.path('out/copy'), 'utf8') === 'two\n');
  await until(() => stdout.split('watching for changes').length === 3);
  expect(stdout).toContain('change: ');
  child.kill('SIGINT');
  const result = await done;
  expect(result.code).toBe(130);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
});
