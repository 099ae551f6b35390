// The state's seal (src/state/seal.ts): a no-op after a settled no-op loads
// neither the journal nor the hash cache; a run after files changed loads only
// what they reach (src/state/delta.ts), decides as the whole way would, and
// seals again; and anything else that could change a decision makes the run
// go the whole way. Runs here use a clock an hour
// ahead (EngineOptions.now), so files are settled at once; the files this
// test writes get distinct past mtimes, so an edit always moves a stat. The
// last test uses the real CLI and the real clock.

import { cpSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { EngineEvent } from '../../src/events.ts';
import { applyNodefile, planNodefile, teardownNodefile, type ApplySummary } from '../../src/operations.ts';
import { acquire } from '../../src/state/lock.ts';
import { Rig } from '../support/rig.ts';

const AHEAD = (): bigint => (BigInt(Date.now()) + 3_600_000n) * 1_000_000n;
let stamp = Math.floor(Date.now() / 1000) - 100_000;

let rig: Rig;
beforeEach(() => {
  rig = new Rig('nodegraph-seal-');
});
afterEach(() => rig.cleanup());

/** Writes a file with an mtime of its own, in the past. */
function put(file: string, content: string): void {
  rig.write(file, content);
  stamp++;
  utimesSync(rig.path(file), stamp, stamp);
}

const GRAPH = `
  for (let i = 0; i < 3; i++) {
    ng.task('copy/' + i, { inputs: { src: ng.file('in/' + i + '.txt'), header: ng.file('in/h') }, outputs: ['out/' + i], run: ['cp', 'in/' + i + '.txt', 'out/' + i] });
  }
  ng.task('all', { inputs: { a: ng.ref('copy/0'), b: ng.ref('copy/1'), c: ng.ref('copy/2'), mode: ng.env('SEAL_TEST_MODE'), v: ng.value({ n: 1 }) }, outputs: ['out/all'], run: { shell: 'cat out/0 out/1 out/2 | tee out/all out/every > /dev/null' } });
`;

function project(body = GRAPH): string {
  for (let i = 0; i < 3; i++) put(`in/${i}.txt`, `${i}\n`);
  put('in/h', 'h\n');
  rig.write('out/.keep', '');
  return rig.nodefile(body);
}

async function apply(nodefile: string, extra: { env?: Record<string, string>; targets?: string[] } = {}): Promise<{ value: ApplySummary; events: EngineEvent[] }> {
  const events: EngineEvent[] = [];
  const result = await applyNodefile({ nodefile, now: AHEAD, env: extra.env ?? {}, onEvent: (e) => events.push(e), ...(extra.targets ? { targets: extra.targets } : {}) });
  if (!result.ok) throw new Error(JSON.stringify(result.error));
  return { value: result.value, events };
}

const seal = (): string => rig.path('.nodegraph/seal');
const stampOf = (file: string): string => {
  const s = statSync(file);
  return `${s.size} ${s.mtimeMs} ${s.ino}`;
};

/** Rewrites the u32 at `at` of the seal's body, and its checksum: a whole seal that says something else. */
function resealWith(at: number, value: number): void {
  const file = readFileSync(seal());
  const header = file.toString('latin1', 0, file.indexOf(10));
  const rest = file.subarray(file.indexOf(10) + 1);
  rest.writeUInt32LE(value, at);
  writeFileSync(seal(), Buffer.concat([Buffer.from(`${header.slice(0, header.lastIndexOf(' ') + 1)}${crc32(rest).toString(16).padStart(8, '0')}\n`, 'latin1'), rest]));
}

/** Built, then a no-op that seals: the state a sealed run starts from. */
async function sealed(body?: string): Promise<string> {
  const nodefile = project(body);
  expect((await apply(nodefile)).value.ran.length).toBeGreaterThan(0);
  const noop = await apply(nodefile);
  expect(noop.value.ran).toEqual([]);
  expect(noop.value.io.sealed).toBe(false);
  statSync(seal());
  return nodefile;
}

describe('the seal', () => {
  test('a no-op after a settled no-op loads no state, and says what the whole way says', async () => {
    const nodefile = await sealed();
    const journal = rig.path('.nodegraph/state.jsonl');
    const before = [journal, rig.path('.nodegraph/hashcache'), seal()].map(stampOf);
    const run = await apply(nodefile);
    expect(run.value.io).toEqual({ stats: 8, contentReads: 0, bytesRead: 0, recordsDecoded: 0, recordsWritten: 0, recordsReadBack: 0, sealed: true, delta: false });
    expect(run.value.upToDate).toBe(4);
    // Its graph, not needed to say "no changes", is there for who asks (watch does).
    expect(run.value.graph.ordered.map((n) => n.id)).toEqual(run.value.plan.entries().map((e) => e.id));
    // Nothing written: not the journal, not the cache, not the seal.
    expect([journal, rig.path('.nodegraph/hashcache'), seal()].map(stampOf)).toEqual(before);
    // The same events as a run that went the whole way (the seal removed), but for the time taken.
    rmSync(seal());
    const full = await apply(nodefile);
    expect(full.value.io.sealed).toBe(false);
    const timeless = (events: EngineEvent[]): unknown[] => events.map((e) => (e.type === 'summary' ? { ...e, durationMs: 0 } : e));
    expect(timeless(run.events)).toEqual(timeless(full.events));
    // And plan, which only reads it.
    const planned = await planNodefile({ nodefile, now: AHEAD, env: {} });
    if (!planned.ok) throw new Error(JSON.stringify(planned.error));
    expect(planned.value.io.sealed).toBe(true);
    expect(planned.value.plan.counts.unchanged).toBe(4);
  });

  test('an edited input, an env or value input, the Nodefile, a deleted or edited output: each runs what it should', async () => {
    const nodefile = await sealed();
    let env: Record<string, string> = {};
    // What a change runs; then the settled no-op after it seals, and the run after that trusts the seal.
    const step = async (change: () => void, runs: string[]): Promise<void> => {
      change();
      expect((await apply(nodefile, { env })).value.ran.toSorted()).toEqual(runs);
      expect((await apply(nodefile, { env })).value.ran).toEqual([]);
      expect((await apply(nodefile, { env })).value.io.sealed).toBe(true);
    };
    const edit = (from: string, to: string) => (): void => writeFileSync(nodefile, readFileSync(nodefile, 'utf8').replace(from, to));

    await step(() => put('in/1.txt', 'one\n'), ['all', 'copy/1']);
    await step(() => void (env = { SEAL_TEST_MODE: 'x' }), ['all']);
    await step(edit('ng.value({ n: 1 })', 'ng.value({ n: 2 })'), ['all']);
    // An argument, and then an output, changed in place: the same number of each.
    await step(edit("'cp', 'in/' + i + '.txt'", "'cp', './in/' + i + '.txt'"), ['copy/0', 'copy/1', 'copy/2']);
    await step(edit("outputs: ['out/all']", "outputs: ['out/every']"), ['all']);
    await step(edit("outputs: ['out/every']", "outputs: ['out/all']"), ['all']);
    await step(() => rmSync(rig.path('out/2')), ['copy/2']);
    await step(() => put('out/all', 'tampered\n'), ['all']);
    expect(rig.read('out/all')).toBe('0\none\n2\n');
  });

  test('a touched input is read once, found the same, and sealed at its new stat', async () => {
    const nodefile = await sealed();
    const later = stamp + 50;
    utimesSync(rig.path('in/h'), later, later);
    const touched = await apply(nodefile);
    expect(touched.value.ran).toEqual([]);
    expect(touched.value.io).toMatchObject({ sealed: true, contentReads: 1, bytesRead: 2 });
    const next = await apply(nodefile);
    expect(next.value.io).toMatchObject({ sealed: true, contentReads: 0 });
  });

  test('a file touched just before a run is sealed by its content: the next run reads it again, and only it', async () => {
    const nodefile = await sealed();
    rmSync(seal());
    // A clock that finds every file settled but one touched from now on (cache.ts, RACY ENTRIES: a 100 ms margin).
    const mark = BigInt(Date.now()) * 1_000_000n;
    await new Promise((r) => setTimeout(r, 20));
    const now = new Date();
    utimesSync(rig.path('in/h'), now, now);
    const racy = await applyNodefile({ nodefile, now: () => mark + 100_000_000n, env: {} });
    if (!racy.ok) throw new Error(JSON.stringify(racy.error));
    expect(racy.value.io.sealed).toBe(false);
    expect(rig.exists('.nodegraph/seal')).toBe(true);
    const next = await apply(nodefile);
    expect(next.value.io).toMatchObject({ sealed: true, contentReads: 1, bytesRead: 2 });
    expect((await apply(nodefile)).value.io).toMatchObject({ sealed: true, contentReads: 0 });
  });

  test('a task stopped, or a run for targets, changes the journal: the next apply goes the whole way', async () => {
    const nodefile = await sealed(`
      ng.task('svc', { inputs: { conf: ng.file('in/h') }, run: ['touch', 'out/up'], outputs: [], stop: ['rm', '-f', 'out/up'] });
    `);
    const stopped = await teardownNodefile({ nodefile, mode: 'stop', now: AHEAD });
    expect(stopped.ok).toBe(true);
    const again = await apply(nodefile);
    expect(again.value.io.sealed).toBe(false);
    expect(again.value.ran).toEqual(['svc']);
  });

  test('a seal that is torn, flipped or of another graph size is ignored, and replaced', async () => {
    const nodefile = await sealed();
    const good = readFileSync(seal());
    for (const bad of [good.subarray(0, good.length - 1), Buffer.concat([good.subarray(0, good.length - 1), Buffer.from([good[good.length - 1]! ^ 1])]), Buffer.from('')]) {
      writeFileSync(seal(), bad);
      const run = await apply(nodefile);
      expect(run.value.io.sealed).toBe(false);
      expect(run.value.ran).toEqual([]);
      expect(run.events.filter((e) => e.type === 'warning')).toEqual([]);
      expect(readFileSync(seal())).toEqual(good);
    }
  });

  test('nothing is sealed for a graph with a check or a glob, a run for targets, or a run that warned', async () => {
    const nodefile = project(`${GRAPH}
      ng.task('checked', { run: ['true'], check: ['true'] });
    `);
    await apply(nodefile);
    await apply(nodefile);
    expect(rig.exists('.nodegraph/seal')).toBe(false);
    rmSync(rig.path('.nodegraph'), { recursive: true });

    writeFileSync(nodefile, readFileSync(nodefile, 'utf8').replace("ng.task('checked', { run: ['true'], check: ['true'] });", "ng.task('globbed', { inputs: { all: ng.glob('in/*.txt') }, run: ['true'] });"));
    await apply(nodefile);
    await apply(nodefile);
    expect(rig.exists('.nodegraph/seal')).toBe(false);
    rmSync(rig.path('.nodegraph'), { recursive: true });

    writeFileSync(nodefile, readFileSync(nodefile, 'utf8').replace(/ng\.task\('globbed'.*$/m, ''));
    await apply(nodefile);
    await apply(nodefile, { targets: ['all'] });
    expect(rig.exists('.nodegraph/seal')).toBe(false);
    writeFileSync(rig.path('.nodegraph/hashcache'), 'not a cache');
    const warned = await apply(nodefile);
    expect(warned.events.some((e) => e.type === 'warning')).toBe(true);
    expect(rig.exists('.nodegraph/seal')).toBe(false);
    await apply(nodefile);
    expect(rig.exists('.nodegraph/seal')).toBe(true);
  });

  test('a sealed run still takes the lock: a second run is refused while one holds it', async () => {
    const nodefile = await sealed();
    const held = acquire(rig.path('.nodegraph'));
    if (!held.ok) throw new Error('could not take the lock');
    try {
      const refused = await applyNodefile({ nodefile, now: AHEAD, env: {} });
      expect(refused.ok).toBe(false);
      if (!refused.ok) expect(refused.error[0]!.reason).toBe('locked');
    } finally {
      held.value.release();
    }
  });

  test('with a seal the lock is taken before the Nodefile loads, and a Nodefile that fails gives it back', async () => {
    const nodefile = await sealed();
    const good = readFileSync(nodefile, 'utf8');
    writeFileSync(nodefile, good.replace('ng.task(', 'ng.task(undefined, {}); ng.task('));
    const broken = await applyNodefile({ nodefile, now: AHEAD, env: {} });
    expect(broken.ok).toBe(false);
    expect(rig.exists('.nodegraph/lock')).toBe(false);
    writeFileSync(nodefile, good);
    expect((await apply(nodefile)).value.io.sealed).toBe(true);
    expect(rig.exists('.nodegraph/lock')).toBe(false);
  });

  test('a changed file: only what it reaches is loaded and run, with the events of the whole way, and the state sealed again', async () => {
    const nodefile = await sealed();
    // The same edit once more from a copy of this state without its seal, to compare.
    cpSync(rig.path('.nodegraph'), rig.path('before/state'), { recursive: true });
    cpSync(rig.path('out'), rig.path('before/out'), { recursive: true });
    const cache = stampOf(rig.path('.nodegraph/hashcache'));
    put('in/1.txt', 'one\n');
    const delta = await apply(nodefile);
    expect(delta.value.io).toMatchObject({ delta: true, sealed: false });
    expect(delta.value.ran.toSorted()).toEqual(['all', 'copy/1']);
    expect(delta.value.upToDate).toBe(2);
    expect(delta.value.plan.entries().map((e) => e.id)).toEqual(['copy/0', 'copy/1', 'copy/2', 'all']);
    expect(delta.value.graph.size).toBe(4);
    expect(rig.read('out/all')).toBe('0\none\n2\n');
    // The hash cache was not loaded, so not written; the next run trusts the new seal.
    expect(stampOf(rig.path('.nodegraph/hashcache'))).toBe(cache);
    expect((await apply(nodefile)).value.io).toMatchObject({ sealed: true, contentReads: 0 });

    for (const [from, to] of [['before/state', '.nodegraph'], ['before/out', 'out']] as const) {
      rmSync(rig.path(to), { recursive: true });
      cpSync(rig.path(from), rig.path(to), { recursive: true });
    }
    rmSync(seal());
    const whole = await apply(nodefile);
    expect(whole.value.io).toMatchObject({ delta: false, sealed: false });
    const timeless = (events: EngineEvent[]): unknown =>
      JSON.parse(JSON.stringify(events, (key, value: unknown) => (key === 'durationMs' ? 0 : value)));
    expect(timeless(delta.events)).toEqual(timeless(whole.events));
  });

  test('a run planned from a seal that an earlier one wrote: upstream at its new record, so an unchanged output still stops there', async () => {
    const nodefile = await sealed(`
      ng.task('first', { inputs: { src: ng.file('in/0.txt') }, outputs: ['out/first'], run: { shell: 'head -c 1 in/0.txt > out/first' } });
      ng.task('copy', { inputs: { src: ng.file('in/1.txt') }, outputs: ['out/1'], run: ['cp', 'in/1.txt', 'out/1'] });
      ng.task('both', { inputs: { a: ng.ref('first'), b: ng.ref('copy') }, outputs: ['out/both'], run: { shell: 'cat out/first out/1 > out/both' } });
    `);
    put('in/1.txt', 'one\n');
    const first = await apply(nodefile);
    expect(first.value.io.delta).toBe(true);
    expect(first.value.ran.toSorted()).toEqual(['both', 'copy']);
    // 'first' reads the changed file and makes the same output; 'both' is reached through it, and 'copy' is the
    // upstream it is compared with: at the record the last run appended, not the one the first seal pointed at.
    put('in/0.txt', '0 and more\n');
    const second = await apply(nodefile);
    expect(second.value.io.delta).toBe(true);
    expect(second.value.ran).toEqual(['first']);
    expect(rig.read('out/both')).toBe('0one\n');
    expect((await apply(nodefile)).value.io.sealed).toBe(true);
  });

  // The seal's paths and ids are kept as its bytes: the stat worker reads the paths where they lie, and an id
  // or a path is made a string only when asked for (a touched or changed file's path, an id a plan lists).
  test('with the stat worker, paths beyond ASCII: a sealed no-op lists every id in order, a touched file is read once, a changed one runs what it reaches', async () => {
    const before = process.env['NODEGRAPH_STAT_AHEAD'];
    process.env['NODEGRAPH_STAT_AHEAD'] = '0';
    try {
      put('in/ü.txt', 'ü\n');
      const nodefile = await sealed(`
  ng.task('copy/u', { inputs: { src: ng.file('in/ü.txt') }, outputs: ['out/日本'], run: ['cp', 'in/ü.txt', 'out/日本'] });
  ng.task('copy/plain', { inputs: { src: ng.file('in/0.txt') }, outputs: ['out/0'], run: ['cp', 'in/0.txt', 'out/0'] });
  ng.task('all/x', { inputs: { a: ng.ref('copy/u'), b: ng.ref('copy/plain') }, outputs: ['out/all'], run: { shell: 'cat out/日本 out/0 > out/all' } });
`);
      const noop = await apply(nodefile);
      expect(noop.value.io).toMatchObject({ sealed: true, contentReads: 0 });
      expect(noop.value.plan.entries().map((e) => e.id)).toEqual(['copy/u', 'copy/plain', 'all/x']);
      const later = stamp + 50;
      utimesSync(rig.path('in/ü.txt'), later, later);
      const touched = await apply(nodefile);
      expect(touched.value.ran).toEqual([]);
      expect(touched.value.io).toMatchObject({ sealed: true, contentReads: 1, bytesRead: 3 });
      put('in/ü.txt', 'üü\n');
      const changed = await apply(nodefile);
      expect(changed.value.io).toMatchObject({ delta: true, sealed: false });
      expect(changed.value.ran.toSorted()).toEqual(['all/x', 'copy/u']);
      expect(rig.read('out/all')).toBe('üü\n0\n');
      expect((await apply(nodefile)).value.io).toMatchObject({ sealed: true, contentReads: 0 });
    } finally {
      if (before === undefined) delete process.env['NODEGRAPH_STAT_AHEAD'];
      else process.env['NODEGRAPH_STAT_AHEAD'] = before;
    }
  });

  // Its checksum is taken on the stat worker where there is one (NODEGRAPH_STAT_AHEAD=0 starts one for any graph), on the main thread otherwise.
  test.each(['off', '0'])('a journal sealed a moment after it was written is known by its content: a seal whose checksum of it differs is not trusted (NODEGRAPH_STAT_AHEAD=%s)', async (ahead) => {
    const before = process.env['NODEGRAPH_STAT_AHEAD'];
    process.env['NODEGRAPH_STAT_AHEAD'] = ahead;
    try {
      await journalKnownByContent();
    } finally {
      if (before === undefined) delete process.env['NODEGRAPH_STAT_AHEAD'];
      else process.env['NODEGRAPH_STAT_AHEAD'] = before;
    }
  });
  async function journalKnownByContent(): Promise<void> {
    const nodefile = await sealed();
    put('in/1.txt', 'one\n');
    // A clock behind: the journal, appended to by this run, is too new to be known by its stat.
    const behind = (): bigint => (BigInt(Date.now()) - 10_000n) * 1_000_000n;
    const changed = await applyNodefile({ nodefile, env: {}, now: behind });
    if (!changed.ok) throw new Error(JSON.stringify(changed.error));
    expect(changed.value.io.delta).toBe(true);
    const file = readFileSync(seal());
    const rest = file.subarray(file.indexOf(10) + 1);
    // After the digest (32 bytes) and the journal's stat (40): its CRC-32, then 1 for "too new".
    expect(rest.readUInt32LE(76)).toBe(1);
    expect(rest.readUInt32LE(72)).toBe(crc32(readFileSync(rig.path('.nodegraph/state.jsonl'))));
    const trusted = await applyNodefile({ nodefile, env: {}, now: behind });
    expect(trusted.ok && trusted.value.io.sealed).toBe(true);
    // The same seal, whole, but for another journal content.
    resealWith(72, (rest.readUInt32LE(72) ^ 1) >>> 0);
    const distrusted = await applyNodefile({ nodefile, env: {}, now: behind });
    expect(distrusted.ok && distrusted.value.io).toMatchObject({ sealed: false, delta: false });
    expect(distrusted.ok && distrusted.value.ran).toEqual([]);
  }

  test('runs planned from the seal count the lines they append: once a load would compact the journal, the run goes the whole way', async () => {
    const nodefile = await sealed();
    // After the journal's stat and checksum: its record lines (4 tasks: a load compacts past 2 × 4 + 1,000).
    const lines = (): number => {
      const file = readFileSync(seal());
      return file.readUInt32LE(file.indexOf(10) + 1 + 80);
    };
    const before = lines();
    put('in/1.txt', 'one\n');
    expect((await apply(nodefile)).value.io.delta).toBe(true);
    expect(lines()).toBe(before + 2);
    resealWith(80, 1009);
    put('in/1.txt', 'uno\n');
    const whole = await apply(nodefile);
    expect(whole.value.io).toMatchObject({ delta: false, sealed: false });
    expect(whole.value.ran.toSorted()).toEqual(['all', 'copy/1']);
  });

  test('the CLI on the real clock: a settled no-op seals, the next prints the same', async () => {
    project();
    rig.nodefile(GRAPH);
    expect((await rig.run(['apply'])).code).toBe(0);
    // Past the hash cache's racy margin (100 ms), so the next run can vouch for every file.
    await new Promise((r) => setTimeout(r, 300));
    const settling = await rig.run(['apply']);
    expect(settling.code).toBe(0);
    expect(rig.exists('.nodegraph/seal')).toBe(true);
    const sealedRun = await rig.run(['apply']);
    const strip = (text: string): string => text.replace(/in \d+(\.\d+)?m?s\./g, 'in T.');
    expect(strip(sealedRun.stdout)).toBe(strip(settling.stdout));
    expect(sealedRun.stdout).toContain('No changes: 4 tasks up to date.');
    const plan = await rig.run(['plan']);
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain('No changes');
    put('in/0.txt', 'zero\n');
    const changed = await rig.run(['apply']);
    expect(changed.stdout).toContain('2 ran');
  });
});
