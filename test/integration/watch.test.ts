// `nodegraph watch`: applies, then applies again when an input changes;
// Ctrl-C ends it with 130 and releases the lock.

import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { collect, Rig, until } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
// Watches a failed test did not end, ended after it.
const spawned: ChildProcess[] = [];
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => {
  for (const child of spawned.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rig.cleanup();
});


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

test('sees an edit to a module the Nodefile imports from its own files (ES or CommonJS), and runs its new text', async () => {
  rig.write('lib/greeting.ts', `import end from './end.cjs';\nexport const greeting = 'one' + end;\n`);
  rig.write('lib/end.cjs', `module.exports = '!';\n`);
  rig.write(
    'Nodefile.ts',
    [
      `import { greeting } from './lib/greeting.ts';`,
      `export default (ng: any) => {`,
      `  ng.task('say', { inputs: { text: ng.value(greeting) }, outputs: ['out/said'], run: ['sh', '-c', 'echo ' + greeting + ' > out/said'] });`,
      `};`,
      ``,
    ].join('\n'),
  );
  const child = rig.spawn(['watch', '--debounce', '50']);
  const done = collect(child);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  await until(() => stdout.includes('watching for changes'));
  expect(readFileSync(rig.path('out/said'), 'utf8')).toBe('one!\n');
  rig.write('lib/greeting.ts', `import end from './end.cjs';\nexport const greeting = 'two' + end;\n`);
  await until(() => readFileSync(rig.path('out/said'), 'utf8') === 'two!\n');
  expect(stdout).toMatch(/change: .*greeting\.ts/);
  // CommonJS is cached by file name, not by URL: it runs again too.
  rig.write('lib/end.cjs', `module.exports = '?';\n`);
  await until(() => readFileSync(rig.path('out/said'), 'utf8') === 'two?\n');
  child.kill('SIGINT');
  expect((await done).code).toBe(130);
});

test("a glob's folder counts only files the pattern matches, and the state never: a log written beside the sources does not hold a run off", async () => {
  rig.write('a.c', 'int a;\n');
  rig.nodefile(`ng.task('cc', { inputs: { src: ng.glob('*.c') }, outputs: ['out/all.c'], run: ['sh', '-c', 'cat *.c > out/all.c'] });`);
  const child = rig.spawn(['watch', '--debounce', '100']);
  const done = collect(child);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  await until(() => stdout.includes('watching for changes'));
  // Something writes beside the sources all the time, as `watch > watch.log` does.
  let noise = 0;
  const writer = setInterval(() => rig.write('watch.log', `${noise++}\n`), 20);
  try {
    rig.write('a.c', 'int b;\n');
    await until(() => readFileSync(rig.path('out/all.c'), 'utf8') === 'int b;\n', 5_000);
    await until(() => stdout.split('watching for changes').length === 3);
  } finally {
    clearInterval(writer);
  }
  expect(stdout).not.toContain('watch.log');
  expect(stdout).not.toContain('.nodegraph');
  // One run for the edit: neither the log nor the run's own state writes started another.
  expect(stdout.split('\nApply:').length - 1).toBe(2);
  child.kill('SIGINT');
  expect((await done).code).toBe(130);
});

test('with --json, stdout is events only, each valid against the schema; what watch itself says goes to stderr', async () => {
  rig.write('in.txt', 'one\n');
  rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
  const child = rig.spawn(['watch', '--json', '--debounce', '50']);
  const done = collect(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  await until(() => stderr.includes('watching for changes'));
  rig.write('in.txt', 'two\n');
  await until(() => stderr.split('watching for changes').length === 3);
  child.kill('SIGINT');
  const result = await done;
  expect(result.code).toBe(130);
  const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string });
  for (const event of events) valid('events', event);
  expect(events.filter((e) => e.type === 'summary')).toHaveLength(2);
  expect(result.stderr).toMatch(/change: .*in\.txt/);
});

test('a failed run evaluates the Nodefile once, as any run: when it does not load, and when its apply fails after loading', async () => {
  // Each evaluation appends a line to log/evals; mode says whether the Nodefile throws, and whether its task fails.
  rig.write(
    'Nodefile.ts',
    `import { appendFileSync, readFileSync } from 'node:fs';
appendFileSync('log/evals', 'evaluated\\n');
const mode = readFileSync('mode', 'utf8').trim();
export default (ng: any) => {
  if (mode === 'throw') throw new Error('mode says throw');
  ng.settings({ atomic: true });
  ng.task('a', { inputs: { mode: ng.file('mode') }, run: ['grep', '-q', 'good', 'mode'] });
};
`,
  );
  rig.write('log/evals', '');
  rig.write('mode', 'throw\n');
  const child = rig.spawn(['watch', '--debounce', '50']);
  spawned.push(child);
  const done = collect(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const evaluations = (): number => rig.read('log/evals').split('\n').length - 1;
  const runs = (n: number): Promise<void> => until(() => stdout.split('watching for changes').length === n + 1);
  await runs(1);
  expect(stderr).toContain('error[nodefile-threw]');
  expect(evaluations()).toBe(1);
  // Loads, and the atomic apply fails (an error after loading): the next change, to its input, is seen.
  rig.write('mode', 'bad\n');
  await runs(2);
  expect(stderr).toContain('error[atomic-apply-failed]');
  expect(evaluations()).toBe(2);
  rig.write('mode', 'bad again\n');
  await runs(3);
  expect(evaluations()).toBe(3);
  rig.write('mode', 'good\n');
  await runs(4);
  expect(stdout).toContain('healthy: generation');
  expect(evaluations()).toBe(4);
  child.kill('SIGINT');
  expect((await done).code).toBe(130);
});

test('a run that finds the lock held waits for its holder and then applies, instead of dropping the change', async () => {
  rig.write('in.txt', 'one\n');
  // `wait` waits for `release` while `hold` exists: that apply keeps the lock until the test lets it go.
  rig.write('hold', '');
  rig.nodefile(`
    ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });
    ng.task('wait', { after: ['copy'], run: { shell: 'if [ -e hold ]; then touch waiting; while [ ! -e release ]; do sleep 0.01; done; fi' } });
  `);
  const holder = collect(rig.spawn(['apply']));
  await until(() => rig.exists('waiting'));
  // The edit the holder did not see: watch's first run meets the lock.
  rig.write('in.txt', 'two\n');
  const child = rig.spawn(['watch', '--debounce', '50']);
  const done = collect(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  await until(() => stderr.includes('error[locked]'));
  rig.write('release', '');
  expect((await holder).code).toBe(0);
  await until(() => rig.read('out/copy') === 'two\n');
  await until(() => stdout.includes('watching for changes'));
  expect(stdout).toMatch(/^waiting for pid \d+ on \S+ \(nodegraph apply\) to release the state lock\n/);
  child.kill('SIGINT');
  expect((await done).code).toBe(130);
});

test('a Nodefile that is not there, or is a folder, is an error and exit 1, not a watch for it to appear', async () => {
  rig.nodefile(`ng.task('a', { run: ['true'] });`);
  const typo = await rig.run(['watch', '-f', 'Nodefil.ts']);
  expect(typo.code).toBe(1);
  expect(typo.stderr).toBe('error[nodefile-not-found]: no Nodefil.ts here; did you mean ./Nodefile.ts? (use -f to name it)\n');
  rig.write('sub/x', '');
  const folder = await rig.run(['watch', '-f', 'sub']);
  expect(folder.code).toBe(1);
  expect(folder.stderr).toBe(`error[nodefile-not-found]: ${rig.path('sub')} is a folder: name the Nodefile in it (-f ${rig.path('sub/Nodefile.ts')})\n`);
});
