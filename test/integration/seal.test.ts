// The state's seal (src/state/seal.ts): a no-op after a settled no-op loads
// neither the journal nor the hash cache, and anything that could change a
// decision makes the run go the whole way. Runs here use a clock an hour
// ahead (EngineOptions.now), so files are settled at once; the files this
// test writes get distinct past mtimes, so an edit always moves a stat. The
// last test uses the real CLI and the real clock.

import { readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { EngineEvent } from '../../src/execute/events.ts';
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
    expect(run.value.io).toEqual({ stats: 8, contentReads: 0, bytesRead: 0, recordsDecoded: 0, sealed: true });
    expect(run.value.upToDate).toBe(4);
    // Its graph, not needed to say "no changes", is there for who asks (watch does).
    expect(run.value.graph.ordered.map((n) => n.id)).toEqual(run.value.plan.entries.map((e) => e.id));
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
