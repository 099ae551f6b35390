// A generation holds every file its Nodefile's evaluation read, not only its
// declared inputs: a Nodefile that reads its settings with readFileSync (named
// import in the Nodefile, default import in a module of its own) and uses them
// in value inputs rolls back onto its old settings, `rollback N` gives back
// N's settings, `watch` follows them, and `plan` names what no generation can
// hold.

import { readFileSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { readManifest } from '../support/generations.ts';
import { collect, Rig, until } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

/**
 * settings.json read by the Nodefile (`import { readFileSync }`), greeting.txt by
 * lib.ts (`import fs`), local.json only if it exists: none of them an input. A
 * task fails when the mode is "bad"; another reads runtime.txt in its action.
 */
function project(): void {
  rig.write('lib.ts', `import fs from 'node:fs';\nexport const greeting = (dir: string): string => fs.readFileSync(dir + '/greeting.txt', 'utf8').trim();\n`);
  rig.write(
    'Nodefile.ts',
    `import { existsSync, readFileSync } from 'node:fs';
import { greeting } from './lib.ts';
export default (ng: any) => {
  const s = JSON.parse(readFileSync(ng.dir + '/settings.json', 'utf8'));
  const local = existsSync(ng.dir + '/local.json') ? JSON.parse(readFileSync(ng.dir + '/local.json', 'utf8')) : {};
  const text = [s.mode, greeting(ng.dir), local.extra ?? '-'].join(' ');
  ng.task('render', { inputs: { v: ng.value(text) }, outputs: ['out/v'], run: async (ctx: any) => {
    readFileSync(ng.dir + '/runtime.txt');
    if (s.mode === 'bad') throw new Error('a bad mode');
    await ctx.writeIfChanged('out/v', text + '\\n');
  } });
};
`,
  );
  rig.write('greeting.txt', 'hello\n');
  rig.write('runtime.txt', 'read by the action only\n');
}
const settings = (mode: string): void => void rig.write('settings.json', `{"mode": "${mode}"}\n`);
const manifest = (n: number): { files: { path: string }[]; probes: { path: string; kind: string }[] } => readManifest(rig.path('.nodegraph'), n) as never;

test('a failed atomic apply rolls back completely: the outputs and the files the Nodefile read are as before', async () => {
  project();
  settings('one');
  const first = await rig.run(['apply', '--atomic']);
  expect(first.stderr).toBe('');
  expect(rig.read('out/v')).toBe('one hello -\n');
  // What the evaluation read, by path; not what an action read, not its modules (already sources).
  expect(manifest(1).files.map((f) => f.path)).toEqual([rig.path('Nodefile.ts'), rig.path('lib.ts'), rig.path('greeting.txt'), rig.path('settings.json')]);
  expect(manifest(1).probes).toEqual([{ path: rig.path('local.json'), kind: 'absent' }]);

  // A no-op records nothing.
  expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^1 /);

  settings('bad');
  rig.write('greeting.txt', 'bonjour\n');
  const failed = await rig.run(['apply', '--atomic']);
  expect(failed.code).toBe(1);
  expect(failed.stdout).toContain('rollback: applying generation 1 again (restored greeting.txt, settings.json)');
  expect(failed.stderr).toBe(
    'error[atomic-apply-failed]: render failed: rolled back to generation 1, and the rollback succeeded; the failed change is kept as generation 2 (`nodegraph rollback 2` applies it again)\n',
  );
  expect(rig.read('out/v')).toBe('one hello -\n');
  expect(rig.read('settings.json')).toBe('{"mode": "one"}\n');
  expect(rig.read('greeting.txt')).toBe('hello\n');
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^1 /);
  expect((await rig.run(['plan'])).stdout).toBe('No changes: 1 task up to date.\n');
});

test('rollback N gives back generation N: its outputs and the files it read; a file it found absent goes only when another generation read it with that content', async () => {
  project();
  settings('one');
  expect((await rig.run(['apply'])).code).toBe(0);
  settings('two');
  rig.write('local.json', '{"extra": "x"}\n');
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(rig.read('out/v')).toBe('two hello x\n');

  const back = await rig.run(['rollback', '1']);
  expect(back.stderr).toBe('');
  expect(back.stdout).toContain('rollback to generation 1: restored settings.json; removed local.json');
  expect(rig.read('out/v')).toBe('one hello -\n');
  expect(rig.read('settings.json')).toBe('{"mode": "one"}\n');
  // Generation 2 holds local.json: removing it loses nothing, and rolling forward gives it back.
  expect(rig.exists('local.json')).toBe(false);
  expect((await rig.run(['rollback', '2'])).code).toBe(0);
  expect(rig.read('local.json')).toBe('{"extra": "x"}\n');
  expect(rig.read('out/v')).toBe('two hello x\n');

  // A local.json no generation holds is the user's own: it stays, and the graph is made with it.
  rig.write('local.json', '{"extra": "mine"}\n');
  const kept = await rig.run(['rollback', '1']);
  expect(kept.stderr).toBe('');
  expect(rig.read('local.json')).toBe('{"extra": "mine"}\n');
  expect(rig.read('settings.json')).toBe('{"mode": "one"}\n');
  expect(rig.read('out/v')).toBe('one hello mine\n');
});

test('watch applies again when a file the Nodefile read changes, or a path it found absent appears', async () => {
  project();
  settings('one');
  const child = rig.spawn(['watch', '--debounce', '50']);
  const done = collect(child);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  const runs = (): number => stdout.split('watching for changes').length - 1;
  await until(() => runs() === 1);
  expect(rig.read('out/v')).toBe('one hello -\n');
  settings('two');
  await until(() => readFileSync(rig.path('out/v'), 'utf8') === 'two hello -\n');
  await until(() => runs() === 2);
  // lib.ts's read, through a default import.
  writeFileSync(rig.path('greeting.txt'), 'hi\n');
  await until(() => readFileSync(rig.path('out/v'), 'utf8') === 'two hi -\n');
  await until(() => runs() === 3);
  writeFileSync(rig.path('local.json'), '{"extra": "new"}\n');
  await until(() => readFileSync(rig.path('out/v'), 'utf8') === 'two hi new\n');
  // What the action read is not followed.
  await until(() => runs() === 4);
  writeFileSync(rig.path('runtime.txt'), 'changed\n');
  settings('three');
  await until(() => readFileSync(rig.path('out/v'), 'utf8') === 'three hi new\n');
  await until(() => runs() === 5);
  expect(stdout).not.toContain('runtime.txt');
  child.kill('SIGINT');
  expect((await done).code).toBe(130);
});

test('plan names each read no generation can hold, in text and in JSON; the files read are not named', async () => {
  rig.write('settings.json', '{}\n');
  rig.write(
    'Nodefile.ts',
    `import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
export default (ng: any) => {
  readFileSync(ng.dir + '/settings.json');
  const status = readFileSync('/proc/self/status', 'utf8');
  const stdin = readFileSync(0, 'utf8');
  spawnSync('true', ['probe']);
  ng.task('t', { inputs: { v: ng.value(status.length > 0 && stdin === '') }, run: ['true'] });
};
`,
  );
  const plan = await rig.run(['plan']);
  expect(plan.stderr).toBe('');
  expect(plan.stdout).toBe(
    [
      '  + t  create  never ran',
      'Plan: 1 to create, 0 to update, 0 to destroy; 0 unchanged.',
      '+ create',
      '! reads /proc/self/status outside the generation (a kernel interface)',
      '! reads file descriptor 0 outside the generation (not opened by path)',
      '! runs true probe while loading: what it reads is outside the generation',
      '',
    ].join('\n'),
  );
  const json = JSON.parse((await rig.run(['plan', '--json'])).stdout) as { generation: { outside: unknown } };
  valid('plan', json);
  expect(json.generation.outside).toEqual([
    { why: 'kernel', path: '/proc/self/status' },
    { why: 'fd', fd: 0 },
    { why: 'process', command: ['true', 'probe'] },
  ]);

  // Modules a no-op never loads are patched when the evaluation asks for them, however it asks.
  rig.write(
    'Nodefile.ts',
    `import fs from 'node:fs';
export default async (ng: any) => {
  const s = await fs.promises.readFile(ng.dir + '/settings.json', 'utf8');
  process.getBuiltinModule('node:child_process').execFileSync('true', ['asked-by-name']);
  ng.task('t', { inputs: { v: ng.value(s) }, run: ['true'] });
};
`,
  );
  expect((await rig.run(['plan'])).stdout).toContain('! runs true asked-by-name while loading: what it reads is outside the generation\n');
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(manifest(1).files.map((f) => f.path)).toEqual([rig.path('Nodefile.ts'), rig.path('settings.json')]);
});
