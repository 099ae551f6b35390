// Sensitive values and env inputs are recorded and shown only as an HMAC under
// the state folder's key: nothing under .nodegraph/ and nothing `explain`
// prints is the plain SHA-256 of a secret, which anyone could test guesses
// against offline. Equal values still compare equal; a state written before
// keyed digests is re-keyed without running its tasks again.

import { createHash, createHmac } from 'node:crypto';
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { fingerprintOf } from '../../src/plan/decide.ts';
import { encodeLine } from '../../src/state/journal.ts';
import { decodePayload } from '../../src/state/record.ts';
import type { ContentHash } from '../../src/ids.ts';
import { readManifest } from '../support/generations.ts';
import { GENERATION_VERSION } from '../../src/transaction/manifest.ts';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
  rig.nodefile(`  ng.task('t', {
    inputs: { password: ng.value(process.env.PASSWORD ?? '', { sensitive: true }), token: ng.env('TOKEN'), mode: ng.value('fast') },
    run: ['sh', '-c', 'echo ran >> runs.txt'],
  });`);
});
afterEach(() => rig.cleanup());

const plain = (value: unknown): string => createHash('sha256').update(JSON.stringify(value)).digest('hex');
const runs = (): number => (rig.exists('runs.txt') ? rig.read('runs.txt').split('\n').length - 1 : 0);

/** Every file under the state folder, as text (binary files as latin1). */
function stateFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.isFile()) files.set(path.relative(rig.dir, full), readFileSync(full, 'latin1'));
    }
  };
  walk(rig.path('.nodegraph'));
  return files;
}

/** The files under .nodegraph/ that hold `hex`. */
const holding = (hex: string): string[] => [...stateFiles()].filter(([, text]) => text.includes(hex)).map(([name]) => name);

const secrets = { PASSWORD: 'hunter3', TOKEN: 'tok-42' };
const leaks = [plain('hunter3'), plain('tok-42')];

/** Rewrites the journal as nodegraph wrote it before keyed digests: the plain SHA-256 of each secret, and no key. */
function makeOld(): void {
  const journal = rig.path('.nodegraph', 'state.jsonl');
  const [header, ...lines] = readFileSync(journal, 'utf8').split('\n').filter((l) => l !== '');
  const records = lines.map((line) => decodePayload(line.slice(9))!);
  const out = [`${header}\n`];
  for (const record of records) {
    const inputs = { ...record.inputs, password: `sha256:${leaks[0]}` as ContentHash, token: `sha256:${leaks[1]}` as ContentHash };
    const fingerprint = fingerprintOf(record.definition, new Map(Object.entries(inputs)), record.upstream);
    out.push(encodeLine({ ...record, inputs, fingerprint }).toString('utf8'));
  }
  writeFileSync(journal, out.join(''));
  rmSync(rig.path('.nodegraph', 'key'));
}

describe('secrets', () => {
  test('are recorded and shown only as a digest under a private key', async () => {
    expect((await rig.run(['apply'], secrets)).code).toBe(0);
    expect(runs()).toBe(1);
    const keyStat = statSync(rig.path('.nodegraph', 'key'));
    expect(keyStat.mode & 0o777).toBe(0o600);
    expect(keyStat.size).toBe(32);
    const key = readFileSync(rig.path('.nodegraph', 'key'));

    const json = await rig.run(['explain', 't', '--json'], secrets);
    const text = await rig.run(['explain', 't'], secrets);
    expect(json.code).toBe(0);
    for (const leak of leaks) {
      expect(holding(leak)).toEqual([]);
      expect(json.stdout).not.toContain(leak);
      expect(text.stdout).not.toContain(leak.slice(0, 8));
    }
    const shown = JSON.parse(json.stdout) as { inputs: { name: string; recorded: string; current: string }[] };
    const hmac = (value: string): string => `sha256:${createHmac('sha256', key).update(JSON.stringify(value)).digest('hex')}`;
    expect(shown.inputs.find((i) => i.name === 'password')).toEqual({ name: 'password', recorded: hmac('hunter3'), current: hmac('hunter3') });
    expect(shown.inputs.find((i) => i.name === 'token')).toEqual({ name: 'token', recorded: hmac('tok-42'), current: hmac('tok-42') });
    // The key itself is never printed.
    expect(json.stdout + text.stdout).not.toContain(key.toString('hex'));

    // Unchanged secrets: nothing runs. A changed one: its task runs, and the plan does not say what it was.
    expect((await rig.run(['apply'], secrets)).code).toBe(0);
    expect(runs()).toBe(1);
    const plan = await rig.run(['plan'], { ...secrets, PASSWORD: 'hunter4' });
    expect(plan.stdout).toContain('input password changed (sensitive)');
    expect(plan.stdout).not.toContain(plain('hunter4').slice(0, 8));
    expect((await rig.run(['apply'], { ...secrets, PASSWORD: 'hunter4' })).code).toBe(0);
    expect(runs()).toBe(2);
    expect((await rig.run(['apply'], { ...secrets, PASSWORD: 'hunter4', TOKEN: 'tok-43' })).code).toBe(0);
    expect(runs()).toBe(3);
    expect(holding(plain('hunter4'))).toEqual([]);
    expect(holding(plain('tok-43'))).toEqual([]);
  });

  test('an old state holding their plain hashes is re-keyed without running again', async () => {
    expect((await rig.run(['apply'], secrets)).code).toBe(0);
    makeOld();
    expect(holding(leaks[0]!)).toEqual(['.nodegraph/state.jsonl']);

    // Read-only commands neither re-key nor print the old hashes.
    const plan = await rig.run(['plan'], secrets);
    expect(plan.stdout).toContain('up to date');
    const json = await rig.run(['explain', 't', '--json'], secrets);
    for (const leak of leaks) expect(json.stdout).not.toContain(leak);
    expect(rig.exists('.nodegraph/key')).toBe(false);

    const apply = await rig.run(['apply'], secrets);
    expect(apply.code).toBe(0);
    expect(runs()).toBe(1);
    for (const leak of leaks) expect(holding(leak)).toEqual([]);
    expect(statSync(rig.path('.nodegraph', 'key')).mode & 0o777).toBe(0o600);
    const again = await rig.run(['plan'], secrets);
    expect(again.stdout).toContain('up to date');
  });

  test('an old state whose secret changed runs its task, and prints neither hash', async () => {
    expect((await rig.run(['apply'], secrets)).code).toBe(0);
    makeOld();
    const changed = { ...secrets, PASSWORD: 'hunter4' };
    const text = await rig.run(['explain', 't'], changed);
    expect(text.stdout).toContain('changed (sensitive)');
    const json = await rig.run(['explain', 't', '--json'], changed);
    for (const leak of [...leaks, plain('hunter4')]) {
      expect(json.stdout).not.toContain(leak);
      expect(text.stdout).not.toContain(leak.slice(0, 8));
    }
    expect((await rig.run(['apply'], changed)).code).toBe(0);
    expect(runs()).toBe(2);
    for (const leak of [...leaks, plain('hunter4')]) expect(holding(leak)).toEqual([]);
  });

  test('a saved plan compares secrets under the key an apply uses, on a new project and an old state', async () => {
    const saved = await rig.run(['plan', '--out', 'plan.json'], secrets);
    expect(saved.code).toBe(0);
    expect(statSync(rig.path('.nodegraph', 'key')).mode & 0o777).toBe(0o600);
    expect(readFileSync(rig.path('plan.json'), 'latin1')).not.toContain(leaks[0]);
    expect((await rig.run(['apply', 'plan.json'], secrets)).code).toBe(0);
    expect(runs()).toBe(1);

    makeOld();
    expect((await rig.run(['plan', '--out', 'plan.json'], secrets)).code).toBe(0);
    for (const leak of leaks) expect(readFileSync(rig.path('plan.json'), 'latin1')).not.toContain(leak);
    const applied = await rig.run(['apply', 'plan.json'], secrets);
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(runs()).toBe(1);
    for (const leak of leaks) expect(holding(leak)).toEqual([]);
  });
});

describe('at rest', () => {
  // A task that writes its env input's value (printing nothing: a task's own log is its output, not nodegraph's).
  const project = (): void => {
    rig.nodefile(`  ng.task('t', {
    inputs: { password: ng.value(process.env.PASSWORD ?? '', { sensitive: true }), token: ng.env('TOKEN') },
    outputs: ['out/token'],
    run: ['sh', '-c', 'mkdir -p out && printf %s "$TOKEN" > out/token'],
  });`);
  };
  const plainValues = ['hunter3', 'tok-42', 'tok-43'];
  /** The files under .nodegraph/ and the saved plan that hold any plain value, or its base64. */
  const plainHolders = (): string[] => {
    const files = stateFiles();
    if (rig.exists('plan.json')) files.set('plan.json', rig.read('plan.json'));
    const needles = plainValues.flatMap((v) => [v, Buffer.from(v).toString('base64')]);
    return [...files].filter(([, text]) => needles.some((n) => text.includes(n))).map(([name]) => name);
  };
  const generation = (n: number): { version: number; env: Record<string, unknown>; digest: string; nodefile: string; files: { path: string; sha256: string }[]; parts?: unknown } =>
    readManifest(rig.path('.nodegraph'), n) as never;

  test('nothing under the state folder nor in a saved plan holds a secret or an env value in plain; rollback sets the env value again', async () => {
    project();
    expect((await rig.run(['plan', '--out', 'plan.json'], { PASSWORD: 'hunter3', TOKEN: 'tok-42' })).code).toBe(0);
    expect((await rig.run(['apply', 'plan.json'], { PASSWORD: 'hunter3', TOKEN: 'tok-42' })).code).toBe(0);
    expect((await rig.run(['apply'], { PASSWORD: 'hunter3', TOKEN: 'tok-43' })).code).toBe(0);
    expect(rig.read('out/token')).toBe('tok-43');
    expect(plainHolders()).toEqual([]);
    expect(generation(1)).toMatchObject({ version: GENERATION_VERSION, env: { TOKEN: { digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), sealed: expect.stringMatching(/^aes-256-gcm:/) } } });
    expect(statSync(rig.path('.nodegraph/generations/1.json')).mode & 0o777).toBe(0o600);
    const listed = await rig.run(['generations', '--json']);
    expect(listed.stdout).toContain('"env":["TOKEN"]');
    for (const value of plainValues) expect(listed.stdout).not.toContain(value);

    const back = await rig.run(['rollback'], { PASSWORD: 'hunter3', TOKEN: 'tok-43' });
    expect(back.stderr).toBe('');
    expect(back.code).toBe(0);
    expect(rig.read('out/token')).toBe('tok-42');
    expect(plainHolders()).toEqual([]);
  });

  test("a task's own env, kept for its destroy command, is in a journal only its owner can read, made so on an older one too", async () => {
    rig.nodefile(`  ng.task('t', {
    env: { TOKEN: 'tok-44' },
    outputs: ['out'],
    run: ['sh', '-c', 'printf %s "$TOKEN" > out'],
    destroy: ['rm', '-f', 'out'],
  });`);
    const journal = rig.path('.nodegraph', 'state.jsonl');
    expect((await rig.run(['apply'])).code).toBe(0);
    expect(readFileSync(journal, 'utf8')).toContain('tok-44');
    expect(statSync(journal).mode & 0o777).toBe(0o600);
    chmodSync(journal, 0o644);
    expect((await rig.run(['apply'])).code).toBe(0);
    expect(statSync(journal).mode & 0o777).toBe(0o600);
  });

  test('the sources digest is keyed: the same sources under another state key give another digest', async () => {
    project();
    expect((await rig.run(['apply'], { TOKEN: 'tok-42' })).code).toBe(0);
    const first = rig.read('.nodegraph/generations/current');
    rmSync(rig.path('.nodegraph'), { recursive: true });
    expect((await rig.run(['apply'], { TOKEN: 'tok-42' })).code).toBe(0);
    const second = rig.read('.nodegraph/generations/current');
    expect(first).toMatch(/^1 [0-9a-f]{64}\n$/);
    expect(second).toMatch(/^1 [0-9a-f]{64}\n$/);
    expect(second).not.toBe(first);
  });

  test('manifests that hold env values in plain are read, rolled back to, and sealed by the next writer', async () => {
    project();
    expect((await rig.run(['apply'], { TOKEN: 'tok-42' })).code).toBe(0);
    expect((await rig.run(['apply'], { TOKEN: 'tok-43' })).code).toBe(0);
    // As a version 1 manifest was: the values in plain, the digest a SHA-256 over them.
    for (const [n, value] of [[1, 'tok-42'], [2, 'tok-43']] as const) {
      const g = generation(n);
      const digest = createHash('sha256').update(`${g.nodefile}\n${JSON.stringify({ TOKEN: value })}\n`);
      for (const f of g.files) digest.update(`${f.path}\0${f.sha256}\n`);
      // Its files listed in it, as before parts.
      const { parts: _, ...listed } = g;
      const old = { ...listed, version: 1, env: { TOKEN: value }, digest: digest.digest('hex') };
      writeFileSync(rig.path(`.nodegraph/generations/${n}.json`), `${JSON.stringify(old)}\n`);
      if (n === 2) writeFileSync(rig.path('.nodegraph/generations/current'), `2 ${old.digest}\n`);
    }
    expect(plainHolders()).toEqual(['.nodegraph/generations/1.json', '.nodegraph/generations/2.json']);
    const listed = await rig.run(['generations']);
    expect(listed.stdout).toMatch(/^ +1 .*env: TOKEN.*\n\* +2 .*env: TOKEN.*\n$/);

    // A no-op apply seals them, and records no new generation.
    expect((await rig.run(['apply'], { TOKEN: 'tok-43' })).code).toBe(0);
    expect(plainHolders()).toEqual([]);
    expect(rig.read('.nodegraph/generations/current')).toBe(`2 ${generation(2).digest}\n`);
    expect([generation(1).version, generation(2).version]).toEqual([GENERATION_VERSION, GENERATION_VERSION]);

    const back = await rig.run(['rollback'], { TOKEN: 'tok-43' });
    expect(back.code).toBe(0);
    expect(rig.read('out/token')).toBe('tok-42');
  });

  test('a rollback whose env values do not open under the state key is refused, and changes nothing', async () => {
    project();
    expect((await rig.run(['apply'], { TOKEN: 'tok-42' })).code).toBe(0);
    expect((await rig.run(['apply'], { TOKEN: 'tok-43' })).code).toBe(0);
    writeFileSync(rig.path('.nodegraph/key'), Buffer.alloc(32, 7));
    const before = rig.read('.nodegraph/generations/current');
    const back = await rig.run(['rollback'], { TOKEN: 'tok-43' });
    expect(back.stderr).toBe(
      `error[generation-damaged]: generation 1 is damaged, and was not applied: ${rig.path('.nodegraph/generations/1.json')}: its value of TOKEN does not open with the state key ${rig.path('.nodegraph/key')} (the key was replaced, or the manifest damaged)\n`,
    );
    expect(back.code).toBe(1);
    expect(rig.read('out/token')).toBe('tok-43');
    expect(rig.read('.nodegraph/generations/current')).toBe(before);
  });
});
