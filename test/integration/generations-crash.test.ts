// The generation store under kill -9, with real processes: a writer records
// generations in a loop (a few files changed each time, its objects written as
// one batch), makes each current and prunes (some prunes sweep the whole
// store), and kills itself after its k-th step that changes the store (each
// object written, the batch synced, each object named, a manifest written,
// each manifest or object removed). After each kill every
// generation left reads back whole and verifies byte for byte: no manifest
// names a part or an object that is not there with its content; and the next
// writer records and prunes on what the kill left. Here k is every step of
// pruning, every manifest write and sync, and every eighth other step; every
// step with NODEGRAPH_CRASH_CAMPAIGN=1 (CI sets it).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { GenerationStore } from '../../src/transaction/generations.ts';

const generations = path.resolve(import.meta.dirname, '../../src/transaction/generations.ts');
const manifest = path.resolve(import.meta.dirname, '../../src/transaction/manifest.ts');

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-gen-crash-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const campaign = process.env['NODEGRAPH_CRASH_CAMPAIGN'] === '1';

/**
 * Four rounds of 40 files (the first round's 40 objects and their parts are synced as one batch, by
 * syncfs), each later round changing two; parts of about 4 files; keep 2, a sweep every 3rd prune that
 * removes. Killed after step `argv[3]` (0: never); prints the steps it took.
 */
const writer = `
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { GenerationStore } from ${JSON.stringify(generations)};
import { sourcesDigest } from ${JSON.stringify(manifest)};
const [dir, first, killAt] = process.argv.slice(2);
let steps = 0;
const onStep = (name) => { console.log('step ' + ++steps + ' ' + name); if (steps === Number(killAt)) process.kill(process.pid, 'SIGKILL'); };
const store = new GenerationStore(path.join(dir, 'state'), { partMask: 3, sweepEvery: 3, onStep });
mkdirSync(path.join(dir, 'src'), { recursive: true });
for (let round = Number(first); round < Number(first) + 4; round++) {
  const files = [];
  for (let i = 0; i < 40; i++) {
    const file = path.join(dir, 'src', 'f' + i);
    const content = 'file ' + i + ' of round ' + (i % 20 === round % 20 ? round : 0) + '\\n';
    writeFileSync(file, content);
    files.push({ path: file, sha256: createHash('sha256').update(content).digest('hex') });
  }
  const n = store.next();
  const nodefile = path.join(dir, 'Nodefile.ts');
  const made = store.record(n, { nodefile, files, probes: [], env: {}, digest: sourcesDigest(nodefile, {}, files, []) }, { status: 'applied' });
  if (!made.ok) { console.log('RECORD ' + JSON.stringify(made.error)); process.exit(2); }
  store.setCurrent(made.value);
  store.prune(2);
}
`;

function runWriter(first: number, killAt: number): { signal: NodeJS.Signals | null; out: string } {
  const script = path.join(dir, 'writer.mts');
  writeFileSync(script, writer);
  const child = spawnSync(process.execPath, [script, path.join(dir, 'store'), String(first), String(killAt)], { encoding: 'utf8' });
  return { signal: child.signal, out: `${child.stdout}${child.stderr}` };
}

function expectWhole(when: string): void {
  const store = new GenerationStore(path.join(dir, 'store', 'state'));
  for (const n of store.numbers()) {
    expect(store.read(n), `generation ${n} ${when}`).toBeDefined();
    expect(store.verify(n).ok, `generation ${n} ${when}`).toBe(true);
  }
}

test('kill -9 after any step of recording or pruning leaves every generation whole, and the next run goes on from there', { timeout: campaign ? 900_000 : 180_000 }, () => {
  const whole = runWriter(0, 0);
  const steps = [...whole.out.matchAll(/^step (\d+) (.*)$/gm)].map((m) => m[2]!);
  expect(new Set(steps), whole.out).toEqual(new Set(['written', 'synced', 'named', 'manifest written', 'manifest removed', 'object removed']));
  const total = steps.length;
  for (let k = 1; k <= total; k++) {
    if (!campaign && k % 8 !== 0 && !/synced|manifest|removed/.test(steps[k - 1]!)) continue;
    rmSync(path.join(dir, 'store'), { recursive: true, force: true });
    const killed = runWriter(0, k);
    expect(killed.signal, `step ${k}: ${killed.out}`).toBe('SIGKILL');
    expectWhole(`after a kill at step ${k} of ${total}`);
    const next = runWriter(100, 0);
    expect(next.signal, next.out).toBe(null);
    expectWhole(`after a kill at step ${k} and a run after it`);
  }
});
