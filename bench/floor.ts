// What a no-op could cost in Node with no object a task: the graph as a table
// of paths and one Int32Array (per task: its file inputs' and outputs' path
// numbers and the numbers of the tasks it needs; no ids or commands, which a
// no-op does not read), each path's last stat in a BigInt64Array, and a program
// that loads them, stats every path, compares and decides every task from
// arrays (the graph's inputs are all files or tasks; the Nodefile is taken as
// unchanged). Timed in interleaved rounds (bench/rounds.ts) beside ninja's
// no-op and nodegraph's (the bundled engine, as bench/run.ts runs it) on
// bench/generate.ts's leaves or bench/chromium.ts's graph, each tool in a copy
// it built. The tables are taken from the engine's own analysis of the
// Nodefile, and the program must find the tasks a changed source makes stale
// (as ninja counts them: everything downstream) before it is timed, so that it
// cannot measure a decision it does not make.
//
//   npx node bench/floor.ts                            # 50,000 leaves: about 3 minutes on 2 cores, most of it the two builds
//   BENCH_FLOOR_N=10000 npx node bench/floor.ts
//   BENCH_FLOOR_GRAPH=chromium npx node bench/floor.ts # 1,500 targets: about 6 minutes

import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { analyze } from '../src/graph/analyze.ts';
import { loadNodefile } from '../src/nodefile/load.ts';
import { snapshotEngine } from './engine.ts';
import { changedSource, chromiumGraph, DEFAULT_SEED, DEFAULT_TARGETS, generateChromium } from './chromium.ts';
import { generate, leafPath } from './generate.ts';
import { log, must } from './process.ts';
import { fmtMiB, fmtTime, measureRounds, median, medianOf, ratioPerRound, type Command } from './rounds.ts';
import { countRan } from './summary.ts';

const REPO = path.resolve(import.meta.dirname, '..');
const NODE = path.join(REPO, 'node_modules', '.bin', 'node');
const chromium = process.env['BENCH_FLOOR_GRAPH'] === 'chromium';
const n = Number(process.env['BENCH_FLOOR_N'] ?? (chromium ? DEFAULT_TARGETS : 50_000));
const work = path.resolve(process.env['BENCH_DIR'] ?? path.join(os.tmpdir(), 'nodegraph-floor'));
const ENGINE = path.join(work, 'engine');
const BIN = path.join(ENGINE, 'bin', 'nodegraph.js');
const jobs = String(os.availableParallelism() + 2);

/** The timed program, plain JavaScript so that no type stripping is timed: `node noop.mjs <tables>` prints `<tasks> tasks, <stale> to run`. */
const NOOP = `const { readFileSync, statSync } = process.getBuiltinModule('node:fs');
const dir = process.argv[2];
const bytes = (name) => { const b = readFileSync(dir + '/' + name); return b.buffer.slice(b.byteOffset, b.byteOffset + b.length); };
const paths = JSON.parse(readFileSync(dir + '/paths.json', 'utf8'));
const tasks = new Int32Array(bytes('tasks.bin'));
const stored = new BigInt64Array(bytes('stats.bin'));
const changed = new Uint8Array(paths.length);
const options = { bigint: true, throwIfNoEntry: false };
for (let i = 0; i < paths.length; i++) {
  const st = statSync(paths[i], options);
  const at = i * 5;
  if (st === undefined || st.dev !== stored[at] || st.ino !== stored[at + 1] || st.size !== stored[at + 2] || st.mtimeNs !== stored[at + 3] || st.ctimeNs !== stored[at + 4]) changed[i] = 1;
}
const stale = new Uint8Array(tasks[0]);
let count = 0;
for (let p = 1, t = 0; p < tasks.length; t++) {
  let run = 0;
  for (let k = tasks[p++]; k > 0; k--) run |= changed[tasks[p++]];
  for (let k = tasks[p++]; k > 0; k--) run |= changed[tasks[p++]];
  for (let k = tasks[p++]; k > 0; k--) run |= stale[tasks[p++]];
  stale[t] = run;
  count += run;
}
process.stdout.write(tasks[0] + ' tasks, ' + count + ' to run\\n');
`;

/** Writes paths.json and tasks.bin (task count, then per task: file inputs, outputs, needs, each a count and numbers) from the engine's analysis. */
async function writeGraph(dir: string, tables: string): Promise<number> {
  const declared = await loadNodefile(path.join(dir, 'Nodefile.ts'));
  if (!declared.ok) throw new Error(`the Nodefile of ${dir} does not load`);
  const graph = analyze(declared.value);
  if (!graph.ok) throw new Error(`the graph of ${dir} does not analyse`);
  const nodes = graph.value.ordered;
  const order = new Map(nodes.map((node, i) => [node.id, i]));
  const paths: string[] = [];
  const numbers = new Map<string, number>();
  const number = (p: string): number => {
    let at = numbers.get(p);
    if (at === undefined) numbers.set(p, (at = paths.push(p) - 1));
    return at;
  };
  const ints = [nodes.length];
  for (const node of nodes) {
    const files = Object.values(node.inputs).flatMap((input) => (input.kind === 'file' ? [number(path.resolve(graph.value.dir, input.path))] : []));
    ints.push(files.length, ...files, node.outputs.length, ...node.outputs.map(number), node.needs.length, ...node.needs.map((id) => order.get(id)!));
  }
  writeFileSync(path.join(tables, 'paths.json'), JSON.stringify(paths));
  writeFileSync(path.join(tables, 'tasks.bin'), Int32Array.from(ints));
  return nodes.length;
}

/** Writes stats.bin: each path's dev, ino, size, mtime and ctime as they are now. */
function writeStats(tables: string): void {
  const paths = JSON.parse(readFileSync(path.join(tables, 'paths.json'), 'utf8')) as string[];
  const stats = new BigInt64Array(paths.length * 5);
  paths.forEach((p, i) => {
    const st = statSync(p, { bigint: true });
    stats.set([st.dev, st.ino, st.size, st.mtimeNs, st.ctimeNs], i * 5);
  });
  writeFileSync(path.join(tables, 'stats.bin'), stats);
}

const staleOf = (output: string): number | undefined => {
  const m = / (\d+) to run/.exec(output);
  return m === null ? undefined : Number(m[1]);
};

/** Writes the graph into both copies; gives a source to change and how many tasks that makes stale, all downstream counted. */
function generateGraph(dirs: readonly string[]): { what: string; source: string; stale: number } {
  if (!chromium) {
    for (const dir of dirs) generate(n, dir);
    // Its object, its library and out/all.
    return { what: `${n.toLocaleString('en-US')} leaves`, source: leafPath(0), stale: 3 };
  }
  const graph = chromiumGraph(n, DEFAULT_SEED);
  for (const dir of dirs) generateChromium(dir, graph);
  const changed = changedSource(graph);
  return { what: `the Chromium-shaped graph of ${n.toLocaleString('en-US')} targets`, source: changed.path, stale: changed.downstream };
}

async function main(): Promise<void> {
  await snapshotEngine(REPO, ENGINE, NODE);
  const ninjaDir = path.join(work, 'ninja');
  const ngDir = path.join(work, 'nodegraph');
  const tables = path.join(work, 'tables');
  const graph = generateGraph([ninjaDir, ngDir]);
  mkdirSync(tables, { recursive: true });
  writeFileSync(path.join(tables, 'noop.mjs'), NOOP);
  log(`engine ${ENGINE}; building ${graph.what} with ninja and with nodegraph`);
  await must(['ninja', '-j', jobs], ninjaDir, 3_600_000);
  const apply = [BIN, 'apply', '-f', 'Nodefile.ts', '-j', jobs];
  await must(apply, ngDir, 3_600_000);
  const tasks = await writeGraph(ngDir, tables);
  const floor = [NODE, '--max-semi-space-size=1', path.join(tables, 'noop.mjs'), tables];

  // The program must see a changed source and everything downstream of it as stale.
  writeStats(tables);
  const source = path.join(ngDir, graph.source);
  writeFileSync(source, `${readFileSync(source, 'utf8')}changed\n`);
  const seen = staleOf(await must(floor, ngDir));
  if (seen !== graph.stale) throw new Error(`the floor program found ${seen} stale tasks after ${graph.source} changed, not ${graph.stale}`);
  await must(apply, ngDir, 600_000);
  // Twice: the first no-op after the change reads the outputs it wrote again (they are racy).
  await must(apply, ngDir, 600_000);
  writeStats(tables);

  const commands: Command[] = [
    { label: 'ninja', cwd: ninjaDir, argv: ['ninja'], memory: true, expected: 0, count: countRan('ninja') },
    { label: 'floor', cwd: ngDir, argv: floor, memory: true, expected: 0, count: staleOf },
    { label: 'nodegraph', cwd: ngDir, argv: apply, memory: true, expected: 0, count: countRan('nodegraph') },
  ];
  const [noop] = await measureRounds('floor', [{ key: 'noop', title: 'no-op', warmup: 1, runs: 3, capMs: 60_000, commands }], 5, work);
  const ninja = noop!.cells.find((c) => c.label === 'ninja');
  const lines = [
    `${tasks.toLocaleString('en-US')} tasks, ${noop!.rounds} rounds × ${noop!.runs} runs, load average ${noop!.loadavg.map((l) => l.toFixed(2)).join(' ')}; ${os.availableParallelism()} cores.`,
    '',
    '| no-op | median | ÷ ninja (per round) | peak RSS | tasks run, per round |',
    '| --- | --- | --- | --- | --- |',
  ];
  for (const cell of noop!.cells) {
    const t = medianOf(cell);
    const r = ratioPerRound(cell, ninja);
    const peak = cell.peakKiB.length === 0 ? '–' : fmtMiB(median(cell.peakKiB));
    lines.push(`| ${cell.label} | ${t === undefined ? '–' : fmtTime(t)} | ${r === undefined ? '–' : `${r.toFixed(2)}×`} | ${peak} | ${cell.ran.join(', ')} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
