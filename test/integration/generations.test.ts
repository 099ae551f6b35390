// Generations: what each settled whole-graph apply recorded, listed, pruned,
// and applied again by `rollback` from the stored copies — refused whole when
// a stored copy is damaged or a large file named by path has changed.

import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { readManifest } from '../support/generations.ts';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

/** A graph whose outputs render settings.json (read by the Nodefile, and an input) and an env value. */
function project(extra = ''): void {
  rig.nodefile(`
  const s = JSON.parse(process.getBuiltinModule('node:fs').readFileSync(ng.dir + '/settings.json', 'utf8'));
  const settings = ng.task('settings', { inputs: { file: ng.file('settings.json') }, run: () => {} });
  ng.task('render', { inputs: { v: ng.value(s.v), settings }, outputs: ['out/v'], run: async (ctx) => { await ctx.writeIfChanged('out/v', String(s.v)); } });
  ng.task('env', { inputs: { e: ng.env('NG_TEST_VALUE') }, outputs: ['out/env'], run: async (ctx) => { await ctx.writeIfChanged('out/env', process.env.NG_TEST_VALUE ?? 'unset'); } });
  ${extra}`);
}
const set = (v: number): void => rig.write('settings.json', `{"v": ${v}}\n`) as unknown as void;

test('each settled whole-graph apply records a generation, a no-op or a targeted apply does not; --keep prunes, and objects no generation names go', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  set(2);
  expect((await rig.run(['apply', 'render'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^1 [0-9a-f]{64}\n$/);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'y' })).code).toBe(0);
  set(3);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'y' })).code).toBe(0);
  const listed = await rig.run(['generations']);
  expect(listed.stdout).toMatch(
    /^ +1 +\S+ +files: Nodefile\.ts, settings\.json; env: NG_TEST_VALUE; ran: (settings|env|render), (settings|env|render), (settings|env|render)\n +2 +\S+ +files: settings\.json; env: NG_TEST_VALUE; ran: env\n\* +3 +\S+ +files: settings\.json; ran: settings, render\n$/,
  );
  const json = JSON.parse((await rig.run(['generations', '--json'])).stdout) as { format: string; version: number; current: number; generations: { number: number; status: string }[] };
  expect(json).toMatchObject({ format: 'nodegraph-generations', version: 1, current: 3, transaction: null });
  expect(json.generations.map((g) => `${g.number} ${g.status}`)).toEqual(['1 applied', '2 applied', '3 applied']);
  // The env value is kept beside the sources, sealed (secrets.test.ts opens it again).
  expect(JSON.parse(rig.read('.nodegraph/generations/1.json')).env).toEqual({ NG_TEST_VALUE: { digest: expect.stringMatching(/^sha256:/), sealed: expect.stringMatching(/^aes-256-gcm:/) } });

  set(4);
  expect((await rig.run(['apply', '--keep', '2'], { NG_TEST_VALUE: 'y' })).code).toBe(0);
  expect(readdirSync(rig.path('.nodegraph/generations')).filter((n) => n.endsWith('.json')).sort()).toEqual(['3.json', '4.json']);
  // The parts that listed settings.json of generations 1 and 2 are no longer stored. Both files are small:
  // their content is in their part, so the parts are all the store holds.
  const manifests = [3, 4].map((n) => readManifest(rig.path('.nodegraph'), n));
  expect(manifests.flatMap((g) => g.files.map((f) => `${path.basename(f.path)} ${f.stored}`))).toEqual(['Nodefile.ts inline', 'settings.json inline', 'Nodefile.ts inline', 'settings.json inline']);
  const named = new Set(manifests.flatMap((g) => g.parts!.map((p) => p.sha256)));
  expect(new Set(readdirSync(rig.path('.nodegraph/generations/objects')))).toEqual(named);
  // A lower --keep on a no-op prunes too: the current one stays.
  expect((await rig.run(['apply', '--keep', '1'], { NG_TEST_VALUE: 'y' })).stdout).toContain('0 ran');
  expect(readdirSync(rig.path('.nodegraph/generations')).filter((n) => n.endsWith('.json'))).toEqual(['4.json']);
});

test('rollback applies the generation before the current one from its stored copies, with its env values; rollback N any kept one', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  // The Nodefile itself is a source: generation 2 applies an edit of it, which rolling back undoes.
  const nodefileBefore = rig.read('Nodefile.ts');
  const edited = nodefileBefore.replace("String(s.v)", "'edited ' + s.v");
  rig.write('Nodefile.ts', edited);
  set(2);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'y' })).code).toBe(0);
  expect(rig.read('out/v')).toBe('edited 2');
  const back = await rig.run(['rollback'], { NG_TEST_VALUE: 'y' });
  expect(back.stderr).toBe('');
  expect(back.code).toBe(0);
  expect(back.stdout).toContain('rollback to generation 1: restored Nodefile.ts, settings.json');
  expect(back.stdout).toContain('Generation 3 is current.');
  expect(rig.read('out/v')).toBe('1');
  expect(rig.read('out/env')).toBe('x');
  expect(rig.read('settings.json')).toBe('{"v": 1}\n');
  expect(rig.read('Nodefile.ts')).toBe(nodefileBefore);
  const forward = await rig.run(['rollback', '2'], { NG_TEST_VALUE: 'x' });
  expect(forward.code).toBe(0);
  expect(rig.read('out/v')).toBe('edited 2');
  expect(rig.read('out/env')).toBe('y');
  expect(rig.read('Nodefile.ts')).toBe(edited);
  const missing = await rig.run(['rollback', '9']);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toBe('error[generation-missing]: there is no generation 9 (known: 1, 2, 3, 4)\n');
});

test('version 2 manifests (files listed, each an object, as an older nodegraph wrote them) are listed, rolled back to, recorded after and pruned beside version 4 ones', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  set(2);
  expect((await rig.run(['apply'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  for (const n of [1, 2]) {
    // The same keys in the same order, version 2 and the files listed where the parts were, each content an object.
    const files = readManifest(rig.path('.nodegraph'), n).files.map(({ content, ...f }) => {
      writeFileSync(rig.path('.nodegraph/generations/objects', f.sha256), Buffer.from(content!, 'base64'));
      return { ...f, stored: 'copy' };
    });
    const stored = JSON.parse(rig.read(`.nodegraph/generations/${n}.json`)) as Record<string, unknown>;
    const old = Object.fromEntries(Object.keys(stored).map((k) => (k === 'parts' ? ['files', files] : [k, k === 'version' ? 2 : stored[k]])));
    writeFileSync(rig.path(`.nodegraph/generations/${n}.json`), `${JSON.stringify(old)}\n`);
  }
  const listed = await rig.run(['generations']);
  expect(listed.stderr).toBe('');
  expect(listed.stdout).toMatch(/^ +1 +\S+ +files: Nodefile\.ts, settings\.json; env: NG_TEST_VALUE; ran: .*\n\* +2 +\S+ +files: settings\.json; ran: settings, render\n$/);
  const back = await rig.run(['rollback', '1'], { NG_TEST_VALUE: 'x' });
  expect(back.stderr).toBe('');
  expect(back.stdout).toContain('rollback to generation 1: restored settings.json');
  expect(rig.read('out/v')).toBe('1');
  expect(readManifest(rig.path('.nodegraph'), 3)).toMatchObject({ version: 4, parts: expect.any(Array) });
  set(5);
  expect((await rig.run(['apply', '--keep', '1'], { NG_TEST_VALUE: 'x' })).code).toBe(0);
  expect(readdirSync(rig.path('.nodegraph/generations')).filter((n) => n.endsWith('.json'))).toEqual(['4.json']);
  // Beside a version 2 manifest the prune sweeps the whole store: what is left is what generation 4 names.
  const g = readManifest(rig.path('.nodegraph'), 4);
  // The Nodefile, unchanged, is still the object generation 1 had; the changed settings.json is kept inline.
  expect(g.files.map((f) => `${path.basename(f.path)} ${f.stored}`)).toEqual(['Nodefile.ts copy', 'settings.json inline']);
  expect(new Set(readdirSync(rig.path('.nodegraph/generations/objects')))).toEqual(new Set([g.files[0]!.sha256, ...g.parts!.map((p) => p.sha256)]));
  expect((await rig.run(['generations'])).stdout).toMatch(/^\* +4 /);
});

test('a generation keeps the Nodefile as it was evaluated: one edited after it was loaded is refused, not stored in its place', async () => {
  // The Nodefile edits its own file while it declares the graph: the run applies B, and the file then holds C.
  rig.nodefile(`
  const fs = process.getBuiltinModule('node:fs');
  const self = ng.dir + '/Nodefile.ts';
  fs.writeFileSync(self, fs.readFileSync(self, 'utf8').replace('VERSION-' + 'B', 'VERSION-' + 'C'));
  ng.task('w', { outputs: ['out.txt'], run: ['sh', '-c', 'echo VERSION-B > out.txt'] });`);
  const applied = await rig.run(['apply']);
  expect(applied.code).toBe(0);
  expect(rig.read('out.txt')).toBe('VERSION-B\n');
  expect(rig.read('Nodefile.ts')).toContain('VERSION-C');
  expect(applied.stdout).toMatch(/^warning: no generation recorded: generation 1 needs .*Nodefile\.ts at sha256:[0-9a-f]{12}…, which has changed$/m);
  expect((await rig.run(['generations'])).stdout).toMatch(/^No generations yet/);
  // Applied as it now is, it is recorded.
  expect((await rig.run(['apply'])).stdout).not.toContain('warning');
  expect(rig.read('out.txt')).toBe('VERSION-C\n');
  expect((await rig.run(['generations'])).stdout).toMatch(/^\* +1 /);
});

test('a generation whose stored copy is damaged is refused before anything changes', async () => {
  project();
  // Over 4 KiB: an object of its own, not kept in its part.
  const large = (v: number): void => rig.write('settings.json', `{"v": ${v}, "pad": "${'x'.repeat(5000)}"}\n`) as unknown as void;
  large(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  large(2);
  expect((await rig.run(['apply'])).code).toBe(0);
  const settingsSha = readManifest(rig.path('.nodegraph'), 1).files.find((f) => f.path.endsWith('settings.json'))!.sha256;
  const object = rig.path('.nodegraph/generations/objects', settingsSha);
  chmodSync(object, 0o600);
  writeFileSync(object, '{"v": 666}\n');
  const refused = await rig.run(['rollback', '1']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(new RegExp(`^error\\[generation-damaged\\]: generation 1 is damaged, and was not applied: ${rig.path('settings.json')}: its stored copy has sha256:[0-9a-f]{12}…, not sha256:${settingsSha.slice(0, 12)}…\\n$`));
  expect(JSON.parse(rig.read('settings.json'))).toMatchObject({ v: 2 });
  expect(rig.read('out/v')).toBe('2');
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^2 [0-9a-f]{64}\n$/);
});

test('rollback does not write over an edit no generation holds: it is refused, and nothing changes', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(2);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(3); // not applied: this text is nowhere else
  const refused = await rig.run(['rollback']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toBe(
    'error[generation-would-overwrite]: generation 1 was not applied: it would write over settings.json, edited since and held by no kept generation (the edit would be lost): apply it, undo it, or move the file aside first\n',
  );
  expect(JSON.parse(rig.read('settings.json'))).toMatchObject({ v: 3 });
  expect(rig.read('out/v')).toBe('2');
  // Its text as generation 2 holds it: nothing is lost, and the rollback goes on.
  set(2);
  expect((await rig.run(['rollback'])).code).toBe(0);
  expect(JSON.parse(rig.read('settings.json'))).toMatchObject({ v: 1 });
  expect(rig.read('out/v')).toBe('1');
});

test('a manifest damaged in one field is refused whole, before anything changes: a field gone, the Nodefile renamed', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(2);
  expect((await rig.run(['apply'])).code).toBe(0);
  const file = rig.path('.nodegraph/generations/1.json');
  const whole = rig.read('.nodegraph/generations/1.json');
  const damaged = {
    'a field gone': JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(whole) as Record<string, unknown>).filter(([k]) => k !== 'ran'))),
    'the Nodefile renamed': whole.replace('Nodefile.ts', 'Nodefilf.ts'),
  };
  for (const [what, text] of Object.entries(damaged)) {
    chmodSync(file, 0o600);
    writeFileSync(file, text);
    const listed = await rig.run(['generations']);
    expect(listed.code, what).toBe(0);
    if (what === 'a field gone') {
      // In its place, said to be damaged: a listing that left it out would hide why a rollback to it fails.
      // (The listing reads manifests; only a rollback's verify checks the digest that finds a renamed Nodefile.)
      expect(listed.stdout.split('\n').map((l) => l.slice(0, 20)), what).toEqual(['!   1  damaged: its ', expect.stringMatching(/^\* {3}2 {2}\d{4}-/), '']);
      expect(listed.stdout, what).toContain(`its manifest is not whole (${file}); a rollback to it is refused`);
      // Nor is it skipped by a rollback to "the one before": it may be that one.
      const plain = await rig.run(['rollback']);
      expect(plain.stderr, what).toBe(`error[generation-damaged]: generation 1 is damaged, and was not applied: ${file}: its manifest is not whole\n`);
    }
    const refused = await rig.run(['rollback', '1']);
    expect(refused.code, what).toBe(1);
    expect(refused.stderr, what).toMatch(/^error\[generation-damaged\]: generation 1 is damaged, and was not applied: .*1\.json: its manifest (is not whole|does not match its digest)\n$/);
    expect(JSON.parse(rig.read('settings.json'))).toMatchObject({ v: 2 });
    expect(rig.read('out/v')).toBe('2');
  }
});

test('a generation whose part (which holds small files inline) is damaged is refused before anything changes', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(2);
  expect((await rig.run(['apply'])).code).toBe(0);
  const manifest = readManifest(rig.path('.nodegraph'), 1);
  const settings = manifest.files.find((f) => f.path.endsWith('settings.json'))!;
  expect(settings.stored).toBe('inline');
  const part = rig.path('.nodegraph/generations/objects', manifest.parts!.find((p) => rig.read(`.nodegraph/generations/objects/${p.sha256}`).includes(settings.content!))!.sha256);
  chmodSync(part, 0o600);
  writeFileSync(part, readFileSync(part, 'utf8').replace(settings.content!, Buffer.from('{"v": 666}\n').toString('base64')));
  const listed = JSON.parse((await rig.run(['generations', '--json'])).stdout) as { generations: { number: number }[]; damaged: unknown[] };
  expect(listed.generations.map((g) => g.number)).toEqual([2]);
  expect(listed.damaged).toEqual([{ number: 1, path: part, message: 'this part of its list of files is missing, or not the content its SHA-256 names' }]);
  const refused = await rig.run(['rollback', '1']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toBe(`error[generation-damaged]: generation 1 is damaged, and was not applied: ${part}: this part of its list of files is missing, or not the content its SHA-256 names\n`);
  expect(rig.read('settings.json')).toBe('{"v": 2}\n');
  expect(rig.read('out/v')).toBe('2');
});

test('a large input is hard-linked where the state shares its filesystem, and otherwise named by path and SHA-256: a changed one is refused', async () => {
  // 9 MiB: over the 8 MiB up to which a file is copied.
  const big = Buffer.alloc(9 * 1024 * 1024, 7);
  rig.write('images/os.img', '');
  writeFileSync(rig.path('images/os.img'), big);
  project(`ng.task('unpack', { inputs: { image: ng.file('images/os.img') }, outputs: ['out/unpacked'], run: ['cp', 'images/os.img', 'out/unpacked'] });`);
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  const stored = readManifest(rig.path('.nodegraph'), 1).files.find((f) => f.path.endsWith('os.img'))!;
  expect(stored.stored).toBe('link');
  expect(statSync(rig.path('.nodegraph/generations/objects', stored.sha256)).ino).toBe(statSync(rig.path('images/os.img')).ino);

  // A state folder on another filesystem (/dev/shm is a tmpfs): the file is named by path.
  const elsewhere = mkdtempSync('/dev/shm/nodegraph-state-');
  try {
    expect((await rig.run(['apply', '--state-dir', elsewhere])).code).toBe(0);
    const named = readManifest(elsewhere, 1).files.find((f) => f.path.endsWith('os.img'))!;
    expect(named.stored).toBe('path');
    set(2);
    rmSync(rig.path('images/os.img'));
    writeFileSync(rig.path('images/os.img'), Buffer.alloc(9 * 1024 * 1024, 8));
    expect((await rig.run(['apply', '--state-dir', elsewhere])).code).toBe(0);
    const refused = await rig.run(['rollback', '--state-dir', elsewhere]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`error[generation-file-changed]: generation 1 needs images/os.img at sha256:${stored.sha256.slice(0, 12)}…, which has changed: nothing was applied\n`);
    expect(rig.read('settings.json')).toBe('{"v": 2}\n');
  } finally {
    rmSync(elsewhere, { recursive: true, force: true });
  }
  // With the state beside it, the hard link kept the old image: rollback puts it back.
  expect((await rig.run(['apply'])).code).toBe(0);
  const back = await rig.run(['rollback']);
  expect(back.stderr).toBe('');
  expect(back.code).toBe(0);
  expect(readFileSync(rig.path('out/unpacked')).equals(big)).toBe(true);
});

test("a Nodefile can make every apply atomic; --no-atomic overrides it, unless the setting is 'always'", async () => {
  project(`ng.settings({ atomic: true });
  ng.task('breaks', { inputs: { v: ng.value(s.v) }, after: ['render'], run: () => { if (s.v === 2) throw new Error('broken on purpose'); } });`);
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(2);
  const atomic = await rig.run(['apply']);
  expect(atomic.code).toBe(1);
  expect(atomic.stderr).toContain('error[atomic-apply-failed]: breaks failed: rolled back to generation 1');
  expect(rig.read('out/v')).toBe('1');
  set(2);
  const plain = await rig.run(['apply', '--no-atomic']);
  expect(plain.code).toBe(1);
  expect(plain.stderr).toBe('');
  expect(rig.read('out/v')).toBe('2');
  // 'always': no flag makes it otherwise.
  rig.write('Nodefile.ts', rig.read('Nodefile.ts').replace('ng.settings({ atomic: true });', "ng.settings({ atomic: 'always' });"));
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  set(2);
  const always = await rig.run(['apply', '--no-atomic']);
  expect(always.code).toBe(1);
  expect(always.stderr).toContain('error[atomic-apply-failed]: breaks failed: rolled back to generation');
  expect(rig.read('out/v')).toBe('1');
});

test('when the preserved copies cannot be saved (a full disk), the atomic apply does not start and nothing changes', async () => {
  const state = rig.path('state');
  mkdirSync(state);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', state]);
  try {
    rig.write('shared/small', 'identity\n');
    project(`ng.preserve('shared');`);
    set(1);
    expect((await rig.run(['apply', '--atomic', '--state-dir', state])).code).toBe(0);
    const files = readdirSync(state).sort();
    writeFileSync(rig.path('shared/large'), Buffer.alloc(512 * 1024, 1));
    set(2);
    const journal = readFileSync(path.join(state, 'state.jsonl'));
    const refused = await rig.run(['apply', '--atomic', '--state-dir', state]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error\[transaction-not-started\]: the atomic apply did not start, and nothing was changed: could not save the preserved path \S+: ENOSPC: no space left on device/);
    expect(rig.read('out/v')).toBe('1');
    expect(readFileSync(path.join(state, 'state.jsonl')).equals(journal)).toBe(true);
    expect(readdirSync(state).sort()).toEqual(files);
    expect(readdirSync(path.join(state, 'generations')).sort()).toEqual(['1.json', 'current', 'objects']);
  } finally {
    execFileSync('umount', [state]);
  }
});


test('a whole destroy leaves no generation current, so the next apply is a new one; a targeted destroy does not', async () => {
  project();
  set(1);
  expect((await rig.run(['apply'])).code).toBe(0);
  expect((await rig.run(['destroy', '--yes', 'render'])).code).toBe(0);
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^1 /);
  expect((await rig.run(['destroy', '--yes'])).code).toBe(0);
  expect(rig.exists('.nodegraph/generations/current')).toBe(false);
  expect((await rig.run(['status'])).stdout).toMatch(/\nNo generation is current \(`nodegraph generations` lists those kept\)\.\n$/);
  expect((await rig.run(['generations'])).stdout).toMatch(/^ {4}1 .*\nnone is current: /);
  // "The one before" has no meaning now; a number still applies a kept one.
  expect((await rig.run(['rollback'])).stderr).toBe('error[generation-missing]: no generation is current, so none before it to roll back to (known: 1; `nodegraph rollback N` applies generation N)\n');
  expect((await rig.run(['apply'])).code).toBe(0);
  expect(rig.read('.nodegraph/generations/current')).toMatch(/^2 /);
  expect(rig.read('out/v')).toBe('1');
});
