// The benchmark: nodegraph side by side with ninja and make, on graphs each
// tool describes in its own language (bench/generate.ts, bench/chromium.ts),
// measured in interleaved rounds (bench/rounds.ts). BENCHMARKS.md says what is
// measured and why; this file is how.
//
//   npm run bench                                       # everything: about 16 minutes on 2 cores, more on a busy machine
//   BENCH_SIZES=1000 BENCH_CHROMIUM=0 npm run bench     # a quick run
//   BENCH_SIZES= BENCH_CHROMIUM=40 BENCH_HASH=0 npm run bench   # the Chromium-shaped scenarios, small
//   BENCH_COMPARE=bench/results/<earlier> npm run bench # and this run beside an earlier one
//   npm run bench -- --report bench/results/<run> [--compare bench/results/<earlier>]
//                                                       # the report again from raw data, nothing measured
//   npm run bench -- --help                             # this text
//
// Raw data (every run's time, per round; memory; counts; the machine) goes to
// bench/results/<stamp>/summary.json; the report is spliced into BENCHMARKS.md
// between its `bench:begin` and `bench:end` markers (BENCH_NO_WRITE=1 to skip).
//
// Environment:
//   BENCH_SIZES=1000,10000,50000  the leaf graph's sizes ('' for none)
//   BENCH_CHROMIUM=1500           the Chromium-shaped graph's targets (0: not run)
//   BENCH_STARTUP=0               skip `node -e 0`, `--version` and the one-task no-ops
//   BENCH_ROUNDS=5                interleaved rounds
//   BENCH_RUNS=N                  measured runs per command and round, for every scenario
//   BENCH_SCENARIOS=noop,leaf     a subset of the leaf graph's (its full build always runs: the others need its state)
//   BENCH_JOBS=N                  job count for all three tools (default cores + 2, ninja's default)
//   BENCH_DIR=/path               where the copies are generated (default $TMPDIR/nodegraph-bench-<pid>)
//   BENCH_HASH=0                  skip bench/hash.ts
//   BENCH_ENGINE=live             measure the checkout itself, not a snapshot taken at the start
//   BENCH_KEEP=1                  keep the generated copies
//   BENCH_COMPARE=DIR             an earlier run's results folder, put side by side with this one

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { changedSource, chromiumGraph, DEFAULT_SEED, generateChromium } from './chromium.ts';
import { folderName, generate, generateOneTask, headerContent, headerPath, layout, leafContent, leafPath, PER_FOLDER, PER_LIB } from './generate.ts';
import { snapshotEngine } from './engine.ts';
import { elapsedMinutes, exec, log, must } from './process.ts';
import { report } from './report.ts';
import { fmtMiB, GNU_TIME, HYPERFINE, measureRounds, median, type Block, type BlockResult, type Command } from './rounds.ts';
import { readTimings, type TimedStep } from '../src/cli/timings.ts';
import { countRan, readRun, TOOLS, type GraphResult, type HashRun, type Machine, type Run, type Summary, type ToolName } from './summary.ts';

const REPO = path.resolve(import.meta.dirname, '..');
/** The pinned Node 24, called directly: `npx` would add about half a second of npm to every run. */
const NODE = path.join(REPO, 'node_modules', '.bin', 'node');

// ---- configuration ----------------------------------------------------------

const env = process.env;
const list = (s: string): number[] =>
  s
    .split(',')
    .map((v) => Number(v.trim().replaceAll('_', '')))
    .filter((v) => v > 0);
const sizes = list(env['BENCH_SIZES'] ?? '1000,10000,50000');
for (const size of sizes) layout(size);
const chromiumTargets = Number(env['BENCH_CHROMIUM'] ?? 1500);
const withStartup = env['BENCH_STARTUP'] !== '0';
const ROUNDS = Number(env['BENCH_ROUNDS'] ?? 5);
const runsOverride = env['BENCH_RUNS'] === undefined ? undefined : Number(env['BENCH_RUNS']);
const jobs = Number(env['BENCH_JOBS'] ?? os.availableParallelism() + 2);
// One folder per run, so that two benchmarks on one machine do not build in each other's copies.
const workRoot = path.resolve(env['BENCH_DIR'] ?? path.join(os.tmpdir(), `nodegraph-bench-${process.pid}`));
const LEAF_SCENARIOS = ['noop', 'leaf', 'touch', 'header'] as const;
const wanted = new Set(env['BENCH_SCENARIOS'] === undefined ? LEAF_SCENARIOS : env['BENCH_SCENARIOS'].split(',').map((s) => s.trim()));
/**
 * The engine measured: a snapshot of the checkout's bin/ and src/ taken when the run starts and
 * bundled as `npm pack` bundles it, so that edits to src/ during the run do not change what is
 * measured half-way. BENCH_ENGINE=live runs the checkout as it is.
 */
const live = env['BENCH_ENGINE'] === 'live';
const ENGINE = live ? REPO : path.join(workRoot, 'engine');
/** Run as a program, as a user's shell runs it: its launcher line starts the node first on PATH, made the pinned one as npx makes it. */
const NODEGRAPH = path.join(ENGINE, 'bin', 'nodegraph.js');
process.env['PATH'] = `${path.dirname(NODE)}:${env['PATH'] ?? ''}`;

const runs = (chosen: number): number => runsOverride ?? chosen;

// ---- the tools ----------------------------------------------------------------

const applyArgv = (t: ToolName): string[] =>
  t === 'nodegraph' ? [NODEGRAPH, 'apply', '-f', 'Nodefile.ts', '-j', String(jobs)] : [t, '-j', String(jobs)];

const command = (t: ToolName, cwd: string, expected: number, extra: Partial<Command> = {}): Command => ({
  label: t,
  cwd,
  argv: applyArgv(t),
  count: countRan(t),
  expected,
  ...extra,
});

/** Shell lines that remove every output and the tool's own state. */
function cleanLines(t: ToolName, outputs: string): string[] {
  switch (t) {
    case 'nodegraph':
      return [`find ${outputs} -type f -delete`, 'rm -rf .nodegraph'];
    case 'ninja':
      return ['ninja -t clean >/dev/null', 'rm -f .ninja_log .ninja_deps', `find ${outputs} -type f -delete`];
    case 'make':
      return [`find ${outputs} -type f -delete`];
  }
}

function writeScripts(dir: string, scripts: Record<string, readonly string[]>): void {
  const head = ['#!/bin/sh', '# Written by bench/run.ts.', 'set -e', 'cd "$(dirname "$0")"'];
  for (const [name, lines] of Object.entries(scripts)) writeFileSync(path.join(dir, name), [...head, ...lines, ''].join('\n'));
}

/** Lines that switch `file` between two contents, whichever it has now. */
const alternate = (file: string, a: string, b: string): string[] => [
  `f=${file}`,
  `if [ "$(cat "$f")" = '${a.trimEnd()}' ]; then printf '%s' '${b}' > "$f"; else printf '%s' '${a}' > "$f"; fi`,
];

// ---- measuring helpers -------------------------------------------------------------

/** Peak RSS of three no-ops (GNU time's %M), the median, in KiB. */
async function peakNoop(argv: readonly string[], dir: string): Promise<number | undefined> {
  const values: number[] = [];
  const file = path.join(dir, '.bench-noop.rss');
  for (let i = 0; i < 3; i++) {
    const result = await exec([GNU_TIME, '-f', '%M', '-o', file, ...argv], { cwd: dir, timeoutMs: 600_000 });
    if (result.code !== 0) return undefined;
    values.push(Number(readFileSync(file, 'utf8').trim().split('\n').at(-1)));
  }
  rmSync(file, { force: true });
  return median(values);
}

async function noopMemory(dirs: Record<ToolName, string>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TOOLS) {
    const kib = await peakNoop(applyArgv(t), dirs[t]);
    if (kib !== undefined) out[t] = kib;
  }
  log(`  peak memory, no-op: ${TOOLS.map((t) => `${t} ${out[t] === undefined ? '?' : fmtMiB(out[t])}`).join(', ')}`);
  return out;
}

/** nodegraph's no-op step by step: three runs with --timings, each step's median (cli/timings.ts). */
async function noopSteps(dir: string): Promise<TimedStep[] | undefined> {
  const runs: TimedStep[][] = [];
  for (let i = 0; i < 3; i++) {
    const result = await exec([...applyArgv('nodegraph'), '--timings'], { cwd: dir, timeoutMs: 600_000 });
    const steps = result.code === 0 ? readTimings(result.stderr) : undefined;
    if (steps === undefined) return undefined;
    runs.push(steps);
  }
  const steps = runs[0]!.map((step, i) => ({ ...step, ms: median(runs.map((r) => r[i]?.ms ?? Number.NaN)) }));
  log(`  nodegraph's no-op by step: ${steps.map((s) => `${s.name} ${s.ms.toFixed(0)} ms`).join(', ')}`);
  return steps;
}

/** Runs the prepare script, then nodegraph with --json, and counts `task-done` events with outcome `ran`. */
async function verifyNodegraph(results: readonly BlockResult[], blocks: readonly Block[], dir: string): Promise<void> {
  for (const [i, block] of blocks.entries()) {
    const c = block.commands.find((x) => x.label === 'nodegraph');
    const cell = results[i]!.cells.find((x) => x.label === 'nodegraph');
    if (c === undefined || cell === undefined) continue;
    if (c.prepare !== undefined) await must(['sh', c.prepare], dir);
    const file = path.join(dir, '.bench-verify.jsonl');
    const result = await exec([...c.argv, '--json'], { cwd: dir, timeoutMs: block.capMs, stdoutFile: file });
    if (result.code !== 0) {
      log(`  nodegraph --json (${block.key}): exit ${result.code}${result.timedOut ? ' (timed out)' : ''}`);
      continue;
    }
    let ran = 0;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      if (!line.includes('"task-done"')) continue;
      const event = JSON.parse(line) as { type?: string; outcome?: string };
      if (event.type === 'task-done' && event.outcome === 'ran') ran++;
    }
    rmSync(file, { force: true });
    cell.jsonRan = ran;
    log(`  nodegraph --json (${block.key}): ${ran} task(s) ran (expected ${c.expected})`);
  }
}

// ---- the graphs -------------------------------------------------------------------------

/** `node -e 0`, `nodegraph --version`, and each tool's no-op on a graph of one task. */
async function startupGraph(): Promise<GraphResult> {
  const base = path.join(workRoot, 'one');
  rmSync(base, { recursive: true, force: true });
  const dirs = {} as Record<ToolName, string>;
  for (const t of TOOLS) {
    dirs[t] = path.join(base, t);
    generateOneTask(dirs[t]);
    await must(applyArgv(t), dirs[t]);
  }
  const start: Block = {
    key: 'start',
    title: 'start-up',
    warmup: 3,
    runs: runs(10),
    capMs: 30_000,
    commands: [
      { label: 'node -e 0', cwd: REPO, argv: [NODE, '-e', '0'] },
      { label: 'nodegraph --version', cwd: REPO, argv: [NODEGRAPH, '--version'] },
    ],
  };
  const one: Block = { key: 'one', title: 'one-task no-op', warmup: 3, runs: runs(10), capMs: 30_000, commands: TOOLS.map((t) => command(t, dirs[t], 0)) };
  const blocks = await measureRounds('start-up', [start, one], ROUNDS, base);
  const steps = await noopSteps(dirs.nodegraph);
  if (env['BENCH_KEEP'] !== '1') rmSync(base, { recursive: true, force: true });
  return {
    key: 'startup',
    title: 'Start-up and a one-task no-op',
    tasks: 1,
    blocks,
    ...(steps === undefined ? {} : { noopSteps: steps }),
    notes: ['The one-task graph: `cp in.txt out.txt`, with `in.txt` its input (bench/generate.ts, generateOneTask), built once before the rounds.'],
  };
}

/** The leaf graph at N leaves (bench/generate.ts): a full build, then the incremental scenarios. */
async function leafGraph(n: number): Promise<GraphResult> {
  const shape = layout(n);
  const base = path.join(workRoot, String(n));
  log(`N = ${n}: ${shape.tasks} tasks; generating three copies under ${base}`);
  rmSync(base, { recursive: true, force: true });
  const dirs = {} as Record<ToolName, string>;
  const changed = Math.floor(n / 2);
  const touched = Math.floor(n / 4);
  const folder = shape.folders - 1;
  for (const t of TOOLS) {
    dirs[t] = path.join(base, t);
    generate(n, dirs[t]);
    writeScripts(dirs[t], {
      'prep-clean.sh': cleanLines(t, 'obj lib out'),
      'prep-leaf.sh': alternate(leafPath(changed), leafContent(changed, 0), leafContent(changed, 1)),
      // A new mtime (now, later than the object's) and ctime, the same content.
      'prep-touch.sh': [`touch ${leafPath(touched)}`],
      'prep-header.sh': alternate(headerPath(folder), headerContent(folder, 0), headerContent(folder, 1)),
    });
  }
  const big = n >= 50_000;
  const perHeader = Math.min(PER_FOLDER, n);
  const full: Block = {
    key: 'full',
    title: 'full build from clean',
    warmup: 0,
    runs: 1,
    capMs: 120_000 + n * 60,
    commands: TOOLS.map((t) => command(t, dirs[t], shape.tasks, { prepare: 'prep-clean.sh', memory: true })),
  };
  const cap = 60_000 + n * 4;
  const steady: Block[] = [
    { key: 'noop', title: 'no-op', warmup: 1, runs: runs(big ? 2 : 3), capMs: cap, commands: TOOLS.map((t) => command(t, dirs[t], 0)) },
    {
      key: 'leaf',
      title: "one leaf's content changed",
      warmup: 1,
      runs: runs(2),
      capMs: cap,
      commands: TOOLS.map((t) => command(t, dirs[t], 3, { prepare: 'prep-leaf.sh' })),
    },
    {
      key: 'touch',
      title: 'one leaf touched, content unchanged',
      warmup: 1,
      runs: runs(2),
      capMs: cap,
      commands: TOOLS.map((t) => command(t, dirs[t], t === 'nodegraph' ? 0 : 3, { prepare: 'prep-touch.sh' })),
    },
    {
      key: 'header',
      title: 'one header changed',
      warmup: 0,
      runs: runs(1),
      // Seconds a run (a thousand commands): three rounds.
      rounds: 3,
      capMs: cap + 120_000,
      // nodegraph's early cutoff: the objects come out identical, so the libraries do not re-run.
      commands: TOOLS.map((t) => command(t, dirs[t], t === 'nodegraph' ? perHeader : perHeader + perHeader / PER_LIB + 1, { prepare: 'prep-header.sh' })),
    },
  ].filter((b) => wanted.has(b.key));

  // The 10,000- and 50,000-leaf builds take minutes each: measured once per tool, so that the whole run fits.
  const blocks = await measureRounds(`N = ${n}`, [full], n <= 1000 ? Math.min(3, ROUNDS) : 1, base);
  const outputs = TOOLS.map((t) => path.join(dirs[t], 'out', 'all'));
  const identicalOutputs = outputs.every((f) => existsSync(f)) && outputs.every((f) => readFileSync(f).equals(readFileSync(outputs[0]!)));
  log(`  out/all identical across the three tools: ${identicalOutputs}`);
  if (n <= 1000) await verifyNodegraph(blocks, [full], dirs.nodegraph);
  const steadyResults = await measureRounds(`N = ${n}`, steady, ROUNDS, base);
  blocks.push(...steadyResults);
  await verifyNodegraph(steadyResults, steady, dirs.nodegraph);
  const memory = await noopMemory(dirs);
  const steps = await noopSteps(dirs.nodegraph);
  if (env['BENCH_KEEP'] !== '1') rmSync(base, { recursive: true, force: true });
  return {
    key: `leaves-${n}`,
    title: `${n.toLocaleString('en-US')} leaves (${shape.tasks.toLocaleString('en-US')} tasks)`,
    tasks: shape.tasks,
    blocks,
    noopMemory: memory,
    ...(steps === undefined ? {} : { noopSteps: steps }),
    identicalOutputs,
    notes: [
      `one leaf changed: \`${leafPath(changed)}\` alternates between \`${leafContent(changed, 0).trim()}\` and \`${leafContent(changed, 1).trim()}\`; ` +
        `one leaf touched: \`touch ${leafPath(touched)}\`; one header changed: \`${headerPath(folder)}\` alternates between two contents (folder ${folderName(folder)}).`,
    ],
  };
}

/** The Chromium-shaped graph (bench/chromium.ts): first plan, a build (once), no-op and one source changed. */
async function chromium(targets: number): Promise<GraphResult> {
  const graph = chromiumGraph(targets, DEFAULT_SEED);
  const { path: source, downstream } = changedSource(graph);
  const base = path.join(workRoot, 'chromium');
  rmSync(base, { recursive: true, force: true });
  const dirs = {} as Record<ToolName, string>;
  let tasks = 0;
  for (const t of TOOLS) {
    dirs[t] = path.join(base, t);
    tasks = generateChromium(dirs[t], graph).tasks;
    writeScripts(dirs[t], {
      'prep-plan.sh': t === 'nodegraph' ? ['rm -rf .nodegraph'] : [':'],
      'prep-source.sh': alternate(source, '', '// changed\n'),
    });
  }
  log(`Chromium-shaped graph: ${targets} targets, ${tasks} commands; generated three copies under ${base}`);
  const dryRun: Record<ToolName, string[]> = {
    nodegraph: [NODEGRAPH, 'plan', '-f', 'Nodefile.ts'],
    ninja: ['ninja', '-n'],
    make: ['make', '-n'],
  };
  const plan: Block = {
    key: 'plan',
    title: 'first plan, before any build',
    warmup: 0,
    runs: 1,
    capMs: 300_000,
    commands: TOOLS.map((t) => command(t, dirs[t], tasks, { argv: dryRun[t], prepare: 'prep-plan.sh', memory: true })),
  };
  const full: Block = {
    key: 'full',
    title: 'full build, once',
    warmup: 0,
    runs: 1,
    capMs: 600_000 + tasks * 30,
    commands: TOOLS.map((t) => command(t, dirs[t], tasks, { memory: true })),
  };
  const steady: Block[] = [
    { key: 'noop', title: 'no-op', warmup: 1, runs: runs(2), capMs: 300_000, commands: TOOLS.map((t) => command(t, dirs[t], 0)) },
    {
      key: 'source',
      title: "one source's content changed",
      warmup: 0,
      runs: runs(2),
      capMs: 300_000,
      // nodegraph's early cutoff: `touch` leaves the object as it was, so nothing downstream runs.
      commands: TOOLS.map((t) => command(t, dirs[t], t === 'nodegraph' ? 1 : downstream, { prepare: 'prep-source.sh' })),
    },
  ];
  const blocks = await measureRounds('Chromium', [plan], Math.min(3, ROUNDS), base);
  blocks.push(...(await measureRounds('Chromium', [full], 1, base)));
  const steadyResults = await measureRounds('Chromium', steady, ROUNDS, base);
  blocks.push(...steadyResults);
  await verifyNodegraph(steadyResults, steady, dirs.nodegraph);
  const memory = await noopMemory(dirs);
  const steps = await noopSteps(dirs.nodegraph);
  if (env['BENCH_KEEP'] !== '1') rmSync(base, { recursive: true, force: true });
  const s = graph.targets.reduce((sum, t) => sum + t.sources.length, 0);
  return {
    key: 'chromium',
    title: `Chromium-shaped graph (${targets.toLocaleString('en-US')} targets, ${tasks.toLocaleString('en-US')} commands)`,
    tasks,
    blocks,
    noopMemory: memory,
    ...(steps === undefined ? {} : { noopSteps: steps }),
    notes: [
      `bench/chromium.ts, seed ${DEFAULT_SEED}: ${s.toLocaleString('en-US')} empty sources, every command \`touch $out\`.`,
      'first plan: `nodegraph plan` with no state, `ninja -n` and `make -n` on the fresh copies (dry runs that list every command); the full build that follows is each tool\'s state for the rest, so it is run once.',
      `one source changed: \`${source}\` alternates between empty and one line. ninja and make re-run ${downstream.toLocaleString('en-US')} commands: its object, its library and every target that links that library, directly or through another; the object comes out the same (\`touch\`), so nodegraph's early cutoff stops there.`,
    ],
  };
}

// ---- extras: hashing, the machine, the engine ---------------------------------------------

async function hashBench(): Promise<HashRun | undefined> {
  const script = path.join(ENGINE, 'bench', 'hash.ts');
  if (env['BENCH_HASH'] === '0' || !existsSync(script)) return undefined;
  log('hashing: bench/hash.ts');
  // A quarter of its default 1 GiB file: throughput is as well measured, in a minute less.
  const result = await exec([NODE, script, '--size-mib', '256'], { cwd: REPO, timeoutMs: 30 * 60_000 });
  const output = (result.stdout + (result.stderr.trim() === '' ? '' : `\n${result.stderr}`)).trim();
  return { command: 'node bench/hash.ts --size-mib 256', ok: result.code === 0, output };
}

async function machine(): Promise<Machine> {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const kib = Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0);
  const git = async (...args: string[]): Promise<string> => {
    try {
      return (await must(['git', ...args], REPO)).trim();
    } catch {
      return '?';
    }
  };
  const dirty = (await git('status', '--porcelain', '--', 'src', 'bin', 'bench/hash.ts'))
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return {
    date: new Date().toISOString(),
    cores: os.availableParallelism(),
    memory: `${(kib / 1024 / 1024).toFixed(1)} GiB`,
    cpu: /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1]?.trim() ?? '?',
    kernel: `${os.type()} ${os.release()}`,
    node: (await must([NODE, '--version'], REPO)).trim(),
    ninja: (await must(['ninja', '--version'], REPO)).trim(),
    make: (await must(['make', '--version'], REPO)).split('\n')[0]!.trim(),
    hyperfine: (await must([HYPERFINE, '--version'], REPO)).trim(),
    commit: await git('rev-parse', '--short', 'HEAD'),
    dirtyFiles: dirty,
    spawnd: existsSync(path.join(REPO, 'node_modules', '.nodegraph', 'spawnd')),
    jobs,
    workRoot,
  };
}

const ENGINE_TEXT = live
  ? 'the checkout itself (BENCH_ENGINE=live)'
  : "a snapshot of the checkout's `bin/` and `src/` taken as the run started, bundled as `npm pack` bundles it: what an installed package runs";

function splice(markdown: string): void {
  const file = path.join(REPO, 'BENCHMARKS.md');
  const begin = '<!-- bench:begin (written by bench/run.ts) -->';
  const end = '<!-- bench:end -->';
  const existing = existsSync(file) ? readFileSync(file, 'utf8') : `# Benchmarks\n\n${begin}\n${end}\n`;
  const i = existing.indexOf(begin);
  const j = existing.indexOf(end);
  const block = `${begin}\n${markdown}\n${end}`;
  writeFileSync(file, i >= 0 && j > i ? existing.slice(0, i) + block + existing.slice(j + end.length) : `${existing.trimEnd()}\n\n${block}\n`);
}

function publish(summary: Summary, resultsDir: string, earlier: Run | undefined): void {
  const markdown = report(summary, REPO, resultsDir, earlier);
  writeFileSync(path.join(resultsDir, 'report.md'), markdown + '\n');
  if (env['BENCH_NO_WRITE'] !== '1') splice(markdown);
  process.stdout.write(markdown + '\n');
}

// ---- main -----------------------------------------------------------------------------------

/** The usage is this file's leading comment: one text for the reader of the source and of --help. */
function usage(): string {
  const lines = readFileSync(new URL(import.meta.url), 'utf8').split('\n');
  const end = lines.findIndex((l) => !l.startsWith('//'));
  return lines.slice(0, end).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') + '\n';
}

async function main(): Promise<void> {
  let args: { report?: string; compare?: string; help?: boolean };
  try {
    args = parseArgs({ options: { report: { type: 'string' }, compare: { type: 'string' }, help: { type: 'boolean', short: 'h' } } }).values;
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n\n${usage()}`);
    process.exitCode = 2;
    return;
  }
  if (args.help === true) {
    process.stdout.write(usage());
    return;
  }
  const compare = args.compare ?? env['BENCH_COMPARE'];
  const earlier = compare === undefined || compare === '' ? undefined : readRun(path.resolve(compare), REPO);
  if (args.report !== undefined) {
    const dir = path.resolve(args.report);
    const summary = JSON.parse(readFileSync(path.join(dir, 'summary.json'), 'utf8')) as Summary;
    if (summary.format !== 2) throw new Error(`${args.report}: not a run of this benchmark's format (it can only be compared with)`);
    publish(summary, dir, earlier);
    return;
  }
  if (/\s/.test(workRoot) || /\s/.test(REPO)) throw new Error('the paths must not contain spaces (hyperfine -N splits commands on them)');
  for (const bin of [HYPERFINE, GNU_TIME, NODE]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing (hyperfine and time are Debian packages; npm ci installs node)`);
  }
  const stamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z').replaceAll(':', '');
  const resultsDir = path.join(REPO, 'bench', 'results', stamp);
  mkdirSync(resultsDir, { recursive: true });
  mkdirSync(workRoot, { recursive: true });
  if (!live) await snapshotEngine(REPO, ENGINE, NODE);
  const m = await machine();
  if (m.dirtyFiles.length > 0) {
    const diff = await exec(['git', 'diff', 'HEAD', '--', 'src', 'bin', 'bench/hash.ts'], { cwd: REPO, timeoutMs: 60_000 });
    writeFileSync(path.join(resultsDir, 'engine.diff'), diff.stdout);
  }
  log(`results in ${path.relative(REPO, resultsDir)}/; sizes ${sizes.join(', ') || 'none'}; Chromium ${chromiumTargets || 'not run'}; ${ROUNDS} rounds; -j ${jobs}; copies under ${workRoot}`);
  const graphs: GraphResult[] = [];
  const summary = (extra: Partial<Summary> = {}): Summary => ({ format: 2, stamp, machine: m, rounds: ROUNDS, engine: ENGINE_TEXT, graphs, ...extra });
  const save = (s: Summary): void => writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify(s, null, 1) + '\n');
  if (withStartup) graphs.push(await startupGraph());
  save(summary());
  for (const size of sizes) {
    graphs.push(await leafGraph(size));
    save(summary());
  }
  if (chromiumTargets > 0) {
    graphs.push(await chromium(chromiumTargets));
    save(summary());
  }
  const hash = await hashBench();
  if (hash !== undefined) writeFileSync(path.join(resultsDir, 'hash.txt'), hash.output + '\n');
  const done = summary({ ...(hash === undefined ? {} : { hash }), minutes: elapsedMinutes() });
  save(done);
  publish(done, resultsDir, earlier);
  if (env['BENCH_KEEP'] !== '1' && env['BENCH_DIR'] === undefined) rmSync(workRoot, { recursive: true, force: true });
  log(`done in ${elapsedMinutes().toFixed(1)} min`);
}

await main();
