// What each start-up setting a launcher could give node is worth: a young
// generation of 1 MiB semi-spaces (`--max-semi-space-size=1`), one V8 helper
// thread (`--v8-pool-size=1`), one malloc arena (MALLOC_ARENA_MAX=1) and V8's
// code cache (module.enableCompileCache, turned off here with
// NODE_DISABLE_COMPILE_CACHE=1). "all" has the semi-space and the code cache
// (what bin/nodegraph.js gives); each other variant drops or adds one, and
// "none" has none; every variant is started through `env` so that each pays
// the same exec. Measured in interleaved rounds (bench/rounds.ts) on the
// bundled engine, as bench/run.ts measures it, with the peak RSS of every run:
// a one-task no-op, a 10,000-leaf no-op and a 10,000-leaf full build.
//
//   npx node bench/launcher.ts                           # about 10 minutes on 2 cores
//   BENCH_LAUNCHER_BUILD=0 npx node bench/launcher.ts    # the no-ops alone, about 2 minutes

import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { snapshotEngine } from './engine.ts';
import { generate, generateOneTask } from './generate.ts';
import { log, must } from './process.ts';
import { fmtMiB, fmtTime, measureRounds, median, medianOf, ratioPerRound, type Block, type BlockResult, type Command } from './rounds.ts';

const REPO = path.resolve(import.meta.dirname, '..');
const NODE = path.join(REPO, 'node_modules', '.bin', 'node');
const work = path.resolve(process.env['BENCH_DIR'] ?? path.join(os.tmpdir(), 'nodegraph-launcher'));
const ENGINE = path.join(work, 'engine');
const BIN = path.join(ENGINE, 'bin', 'nodegraph.js');
const jobs = String(os.availableParallelism() + 2);

interface Variant {
  readonly label: string;
  readonly semi: boolean;
  readonly pool: boolean;
  readonly arena: boolean;
  readonly cache: boolean;
}

const VARIANTS: readonly Variant[] = [
  { label: 'all', semi: true, pool: false, arena: false, cache: true },
  { label: 'no semi-space', semi: false, pool: false, arena: false, cache: true },
  { label: 'no cache', semi: true, pool: false, arena: false, cache: false },
  { label: 'with pool', semi: true, pool: true, arena: false, cache: true },
  { label: 'with arena', semi: true, pool: false, arena: true, cache: true },
  { label: 'none', semi: false, pool: false, arena: false, cache: false },
];

const argvOf = (v: Variant, args: readonly string[]): string[] => [
  'env',
  ...(v.arena ? ['MALLOC_ARENA_MAX=1'] : ['-u', 'MALLOC_ARENA_MAX']),
  ...(v.cache ? [] : ['NODE_DISABLE_COMPILE_CACHE=1']),
  NODE,
  ...(v.semi ? ['--max-semi-space-size=1'] : []),
  ...(v.pool ? ['--v8-pool-size=1'] : []),
  BIN,
  ...args,
];

const apply = ['apply', '-f', 'Nodefile.ts', '-j', jobs];
const commands = (dir: string, prepare?: string): Command[] =>
  VARIANTS.map((v) => ({ label: v.label, cwd: dir, argv: argvOf(v, apply), memory: true, ...(prepare === undefined ? {} : { prepare }) }));

function table(title: string, b: BlockResult): string[] {
  const all = b.cells.find((c) => c.label === 'all');
  const lines = [`${title} (${b.rounds} rounds × ${b.runs} runs)`, '', '| variant | median | ÷ all (per round) | peak RSS | ÷ all |', '| --- | --- | --- | --- | --- |'];
  const allPeak = all === undefined || all.peakKiB.length === 0 ? undefined : median(all.peakKiB);
  for (const c of b.cells) {
    const t = medianOf(c);
    const peak = c.peakKiB.length === 0 ? undefined : median(c.peakKiB);
    const r = ratioPerRound(c, all);
    lines.push(
      `| ${c.label} | ${t === undefined ? '–' : fmtTime(t)} | ${r === undefined ? '–' : r.toFixed(3)} | ${peak === undefined ? '–' : fmtMiB(peak)} | ${peak === undefined || allPeak === undefined ? '–' : (peak / allPeak).toFixed(3)} |`,
    );
  }
  lines.push('');
  return lines;
}

async function main(): Promise<void> {
  await snapshotEngine(REPO, ENGINE, NODE);
  const one = path.join(work, 'one');
  const leaves = path.join(work, '10000');
  generateOneTask(one);
  generate(10_000, leaves);
  writeFileSync(path.join(leaves, 'prep-clean.sh'), 'cd "$(dirname "$0")"\nfind obj lib out -type f -delete\nrm -rf .nodegraph\n');
  log(`engine ${ENGINE}; building the two graphs once`);
  await must([BIN, ...apply], one);
  await must([BIN, ...apply], leaves, 1_800_000);
  const blocks: Block[] = [
    { key: 'one', title: 'one-task no-op', warmup: 2, runs: 10, capMs: 30_000, commands: commands(one) },
    { key: 'noop', title: '10,000-leaf no-op', warmup: 1, runs: 3, capMs: 60_000, commands: commands(leaves) },
  ];
  const results = await measureRounds('launcher', blocks, 6, work);
  const lines = [...table('One-task no-op', results[0]!), ...table('10,000-leaf no-op', results[1]!)];
  if (process.env['BENCH_LAUNCHER_BUILD'] !== '0') {
    const build: Block = { key: 'build', title: '10,000-leaf full build', warmup: 0, runs: 1, capMs: 600_000, commands: commands(leaves, 'prep-clean.sh') };
    const [built] = await measureRounds('launcher', [build], 3, work);
    lines.push(...table('10,000-leaf full build', built!));
  }
  process.stdout.write(`Load average at the end ${os.loadavg()[0]!.toFixed(2)}; ${os.availableParallelism()} cores.\n\n${lines.join('\n')}`);
}

await main();
