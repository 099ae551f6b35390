// The benchmark: nodegraph side by side with ninja and make (issue 3).
//
//   npm run bench                         # N = 1,000, 10,000 and 50,000
//   BENCH_SIZES=1000 npm run bench        # a quick run
//
// For each N it generates three copies of the same graph (bench/generate.ts),
// one per tool, so each tool works on a state it built itself, and measures
// with hyperfine (spawning each command without a shell, `-N`): a full build
// from clean, a no-op, one leaf's content changed, one leaf touched, one
// header changed; and the peak memory of each tool with GNU time. Every
// scenario is checked: the number of tasks each tool ran in its last measured
// run is read from its output, and nodegraph is run once more with --json and
// its `task-done` events counted, so the benchmark cannot silently measure the
// wrong thing.
//
// Raw data (hyperfine's JSON, memory, counts, the machine) goes to
// bench/results/<timestamp>/; the tables are spliced into BENCHMARKS.md
// between its `bench:begin` and `bench:end` markers (BENCH_NO_WRITE=1 to skip).
//
// Environment:
//   BENCH_SIZES=1000,10000     the sizes (default 1000,10000,50000)
//   BENCH_DIR=/path            where the copies are generated (default $TMPDIR/nodegraph-bench)
//   BENCH_RUNS=N               every scenario this many runs (default: per size, see RUNS)
//   BENCH_JOBS=N               job count for all three tools (default cores + 2)
//   BENCH_SCENARIOS=noop,leaf  a subset (full always runs first: the others need its state)
//   BENCH_VERIFY_FULL_MAX=N    re-run nodegraph's full build with --json up to this N (default 1000)
//   BENCH_HASH=0               skip bench/hash.ts
//   BENCH_ENGINE=live          measure the checkout itself, not a snapshot taken at the start
//   BENCH_KEEP=1               keep the generated copies (by default removed once their size is done)

import { spawn, type StdioOptions } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  folderName,
  generate,
  headerContent,
  headerPath,
  layout,
  leafContent,
  leafPath,
  PER_FOLDER,
  PER_LIB,
  type Layout,
} from './generate.ts';

const REPO = path.resolve(import.meta.dirname, '..');
/** The pinned Node 24, called directly: `npx` would add about half a second of npm to every run. */
const NODE = path.join(REPO, 'node_modules', '.bin', 'node');
/**
 * The engine measured: a snapshot of the checkout's bin/ and src/ (committed and uncommitted),
 * taken when the run starts and bundled as `npm pack` bundles it, so that edits made to src/
 * while a run of the better part of an hour goes on do not change what is measured half-way.
 * BENCH_ENGINE=live runs the checkout as it is (its TypeScript sources, unless it has a dist/).
 */
const live = process.env.BENCH_ENGINE === 'live';
const HYPERFINE = '/usr/bin/hyperfine';
const GNU_TIME = '/usr/bin/time';

// ---- configuration ----------------------------------------------------------

type ToolName = 'nodegraph' | 'ninja' | 'make';
const TOOLS: readonly ToolName[] = ['nodegraph', 'ninja', 'make'];
type ScenarioKey = 'full' | 'noop' | 'leaf' | 'touch' | 'header';
const SCENARIO_KEYS: readonly ScenarioKey[] = ['full', 'noop', 'leaf', 'touch', 'header'];

const sizes = (process.env.BENCH_SIZES ?? '1000,10000,50000')
  .split(',')
  .map((s) => Number(s.trim().replaceAll('_', '')))
  .filter((n) => n > 0);
for (const n of sizes) layout(n);
const jobs = Number(process.env.BENCH_JOBS ?? os.availableParallelism() + 2);
const workRoot = path.resolve(process.env.BENCH_DIR ?? path.join(os.tmpdir(), 'nodegraph-bench'));
const runsOverride = process.env.BENCH_RUNS === undefined ? undefined : Number(process.env.BENCH_RUNS);
const wanted = new Set<ScenarioKey>(
  process.env.BENCH_SCENARIOS === undefined
    ? SCENARIO_KEYS
    : ['full', ...(process.env.BENCH_SCENARIOS.split(',').map((s) => s.trim()) as ScenarioKey[])],
);
const stamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z').replaceAll(':', '');
const resultsDir = path.join(REPO, 'bench', 'results', stamp);

const ENGINE = live ? REPO : path.join(workRoot, 'engine');
/**
 * Run as a program, as a user's shell runs it (npx, a PATH lookup): its launcher line
 * starts node with the settings bin/nodegraph.js gives it, and that node is the first
 * on PATH, made the pinned one here as npx makes it.
 */
const NODEGRAPH = path.join(ENGINE, 'bin', 'nodegraph.js');
process.env['PATH'] = `${path.dirname(NODE)}:${process.env['PATH'] ?? ''}`;

if (/\s/.test(workRoot) || /\s/.test(REPO)) throw new Error('the paths must not contain spaces (hyperfine -N splits commands on them)');

/**
 * Runs per scenario and size: warm-up runs and measured runs. A full build is
 * measured from clean every time, so it gets no warm-up. Each tool's full build
 * takes about a minute at 50,000 leaves on a 2-core machine, and make's own
 * moved from 46 to 69 s between runs measured once (2026-12-02): three runs at
 * every size, so that a ratio is of medians. The no-op and the header change run
 * fewer times at 50,000: the whole run has to stay well under an hour (see
 * BENCHMARKS.md).
 */
function runsFor(scenario: ScenarioKey, n: number): { warmup: number; runs: number } {
  const big = n >= 50_000;
  const table: Record<ScenarioKey, { warmup: number; runs: number }> = {
    full: { warmup: 0, runs: 3 },
    noop: { warmup: big ? 1 : 2, runs: big ? 5 : 10 },
    leaf: { warmup: 1, runs: 10 },
    touch: { warmup: 1, runs: 10 },
    header: { warmup: 0, runs: big ? 2 : 3 },
  };
  const chosen = table[scenario];
  return runsOverride === undefined ? chosen : { warmup: Math.min(chosen.warmup, 1), runs: runsOverride };
}

/** Per measured run: a cap so that a hung tool cannot hold the benchmark forever. */
function capPerRunMs(scenario: ScenarioKey, n: number): number {
  return scenario === 'full' ? 120_000 + n * 60 : 60_000 + n * 4;
}

/**
 * Up to which N nodegraph's full build is run once more with --json: above it, that would cost
 * another build of many minutes, and the measured run's own summary line is the check.
 */
const VERIFY_FULL_MAX = Number(process.env.BENCH_VERIFY_FULL_MAX ?? 1000);

// ---- the tools --------------------------------------------------------------

interface Tool {
  readonly name: ToolName;
  /** The command as hyperfine runs it (split on spaces, no shell), in the tool's folder. */
  readonly argv: readonly string[];
  /** Shell lines that remove every output and the tool's own state. */
  readonly clean: readonly string[];
  /** Tasks run, from the tool's normal output. */
  count(output: string): number | undefined;
}

function tool(name: ToolName): Tool {
  const removeOutputs = 'find obj lib out -type f -delete';
  switch (name) {
    case 'nodegraph':
      return {
        name,
        argv: [NODEGRAPH, 'apply', '-f', 'Nodefile.ts', '-j', String(jobs)],
        clean: [removeOutputs, 'rm -rf .nodegraph'],
        count: (output) => {
          const match = /Apply: (\d+) ran/.exec(output);
          return match === null ? undefined : Number(match[1]);
        },
      };
    case 'ninja':
      return {
        name,
        argv: ['ninja', '-j', String(jobs)],
        clean: ['ninja -t clean >/dev/null', 'rm -f .ninja_log .ninja_deps', removeOutputs],
        count: (output) =>
          /ninja: no work to do/.test(output) ? 0 : output.split('\n').filter((l) => /^\[\d+\/\d+\] /.test(l)).length,
      };
    case 'make':
      return {
        name,
        argv: ['make', '-j', String(jobs)],
        clean: [removeOutputs],
        count: (output) => output.split('\n').filter((l) => /^(cp|cat) /.test(l)).length,
      };
  }
}

// ---- the scenarios ----------------------------------------------------------

interface Scenario {
  readonly key: ScenarioKey;
  readonly title: string;
  /** The prepare script (in each tool's folder), run before every measured run. */
  readonly prepare?: string;
  /** Tasks each tool should run. */
  expected(tool: ToolName, shape: Layout): number;
}

const tasksPerHeader = (shape: Layout): number => {
  const leaves = Math.min(PER_FOLDER, shape.n);
  return leaves + leaves / PER_LIB + 1;
};

const SCENARIOS: Record<ScenarioKey, Scenario> = {
  full: { key: 'full', title: 'full build from clean', prepare: 'prep-clean.sh', expected: (_t, s) => s.tasks },
  noop: { key: 'noop', title: 'no-op', expected: () => 0 },
  leaf: { key: 'leaf', title: "one leaf's content changed", prepare: 'prep-leaf.sh', expected: () => 3 },
  touch: {
    key: 'touch',
    title: 'one leaf touched, content unchanged',
    prepare: 'prep-touch.sh',
    expected: (t) => (t === 'nodegraph' ? 0 : 3),
  },
  header: {
    key: 'header',
    title: 'one header changed',
    prepare: 'prep-header.sh',
    // nodegraph's early cutoff: the objects come out identical, so the libraries do not re-run.
    expected: (t, s) => (t === 'nodegraph' ? Math.min(PER_FOLDER, s.n) : tasksPerHeader(s)),
  },
};

/** The leaf that changes, the leaf that is touched, the folder whose header changes. */
function targets(shape: Layout): { changed: number; touched: number; folder: number } {
  return { changed: Math.floor(shape.n / 2), touched: Math.floor(shape.n / 4), folder: shape.folders - 1 };
}

function writePrepareScripts(dir: string, t: Tool, shape: Layout): void {
  const { changed, touched, folder } = targets(shape);
  const head = ['#!/bin/sh', '# Written by bench/run.ts.', 'set -e', 'cd "$(dirname "$0")"'];
  const alternate = (file: string, v0: string, v1: string): string[] => [
    `f=${file}`,
    `if [ "$(cat "$f")" = '${v0.trimEnd()}' ]; then printf '%s\\n' '${v1.trimEnd()}' > "$f"; else printf '%s\\n' '${v0.trimEnd()}' > "$f"; fi`,
  ];
  const scripts: Record<string, string[]> = {
    'prep-clean.sh': t.clean.slice(),
    'prep-leaf.sh': alternate(leafPath(changed), leafContent(changed, 0), leafContent(changed, 1)),
    // A new mtime (now, later than the object's) and ctime, the same content.
    'prep-touch.sh': [`touch ${leafPath(touched)}`],
    'prep-header.sh': alternate(headerPath(folder), headerContent(folder, 0), headerContent(folder, 1)),
  };
  for (const [name, lines] of Object.entries(scripts)) {
    writeFileSync(path.join(dir, name), [...head, ...lines, ''].join('\n'));
  }
}

// ---- processes ----------------------------------------------------------------

interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly ms: number;
  readonly stdout: string;
  readonly stderr: string;
}

let current: { pid: number } | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (current !== undefined) {
      try {
        process.kill(-current.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    process.stderr.write(`\nbench: ${signal}, stopped\n`);
    process.exit(130);
  });
}

/**
 * Spawns argv without a shell in its own process group; on timeout the whole
 * group is killed (hyperfine and whatever it was running). stdout goes to
 * `stdoutFile` when given (large outputs), else is collected.
 */
function exec(
  argv: readonly string[],
  options: { cwd: string; timeoutMs: number; stdoutFile?: string },
): Promise<Finished> {
  const started = performance.now();
  let fd: number | undefined;
  let stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
  if (options.stdoutFile !== undefined) {
    fd = openSync(options.stdoutFile, 'w');
    stdio = ['ignore', fd, 'pipe'];
  }
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: options.cwd, stdio, detached: true });
    if (child.pid !== undefined) current = { pid: child.pid };
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      if (stdout.length < 50_000_000) stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 1_000_000) stderr += chunk;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }, options.timeoutMs);
    const done = (code: number | null, signal: NodeJS.Signals | null): void => {
      clearTimeout(timer);
      current = undefined;
      if (fd !== undefined) closeSync(fd);
      resolve({ code, signal, timedOut, ms: performance.now() - started, stdout, stderr });
    };
    child.on('error', (error) => {
      stderr += String(error);
      done(null, null);
    });
    child.on('close', done);
  });
}

async function must(argv: readonly string[], cwd: string, timeoutMs = 600_000): Promise<string> {
  const result = await exec(argv, { cwd, timeoutMs });
  if (result.code !== 0) {
    throw new Error(`${argv.join(' ')} failed (${result.timedOut ? 'timed out' : `exit ${result.code}`}): ${result.stderr.slice(-2000)}`);
  }
  return result.stdout;
}

const t0 = performance.now();
function log(message: string): void {
  const elapsed = Math.round((performance.now() - t0) / 1000);
  process.stderr.write(`[${String(Math.floor(elapsed / 60)).padStart(2, '0')}:${String(elapsed % 60).padStart(2, '0')}] ${message}\n`);
}

// ---- measuring --------------------------------------------------------------

interface Measured {
  readonly median: number;
  readonly mean: number;
  readonly stddev: number | null;
  readonly min: number;
  readonly max: number;
  readonly runs: number;
  readonly warmup: number;
}

interface Cell {
  readonly tool: ToolName;
  readonly command: string;
  readonly prepare: string | undefined;
  readonly time?: Measured;
  readonly error?: string;
  /** Tasks run in the last measured run, read from the tool's own output. */
  readonly ran?: number;
  readonly expected: number;
  /** nodegraph only: `task-done` events with outcome `ran` in one more run with --json. */
  readonly jsonRan?: number;
  /** Peak RSS in KiB (full build: of every measured run, the median). */
  readonly peakKiB?: number;
}

interface SizeResult {
  readonly n: number;
  readonly tasks: number;
  readonly scenarios: Partial<Record<ScenarioKey, Cell[]>>;
  readonly noopMemory: Partial<Record<ToolName, number>>;
  readonly identicalOutputs?: boolean;
  /** nodegraph's touched run and no-op measured alternately, in the same minutes. */
  readonly touchPairs?: TouchPairs;
}

interface TouchPairs {
  readonly pairs: number;
  readonly touch: number;
  readonly noop: number;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function measure(
  n: number,
  shape: Layout,
  scenario: Scenario,
  t: Tool,
  dir: string,
  workDir: string,
): Promise<Cell> {
  const { warmup, runs } = runsFor(scenario.key, n);
  const base = `${n}-${scenario.key}-${t.name}`;
  const jsonFile = path.join(resultsDir, `${base}.json`);
  const outputFile = path.join(workDir, `${base}.out`);
  const memFile = path.join(resultsDir, `${base}.rss`);
  // The full build's peak memory is taken on the measured runs themselves (GNU time adds one
  // fork and exec, about a millisecond, to builds that take seconds), so that the 50,000-leaf
  // build does not have to run again just for it.
  const argv = scenario.key === 'full' ? [GNU_TIME, '-f', '%M', '-a', '-o', memFile, ...t.argv] : [...t.argv];
  const command = argv.join(' ');
  const prepare = scenario.prepare === undefined ? undefined : `sh ${scenario.prepare}`;
  const hyperfine = [
    HYPERFINE,
    '-N',
    '--style',
    'basic',
    '--warmup',
    String(warmup),
    '--runs',
    String(runs),
    ...(prepare === undefined ? [] : ['--prepare', prepare]),
    `--output=${outputFile}`,
    '--export-json',
    jsonFile,
    '-n',
    `${t.name} ${scenario.key} ${n}`,
    command,
  ];
  const timeoutMs = (warmup + runs) * capPerRunMs(scenario.key, n) + 60_000;
  const expected = scenario.expected(t.name, shape);
  const result = await exec(hyperfine, { cwd: dir, timeoutMs });
  writeFileSync(path.join(workDir, `${base}.hyperfine.log`), result.stdout + result.stderr);
  if (result.code !== 0 || !existsSync(jsonFile)) {
    const why = result.timedOut
      ? `timed out after ${Math.round(timeoutMs / 1000)} s`
      : `hyperfine exit ${result.code}: ${result.stderr.trim().split('\n').slice(-3).join(' / ')}`;
    log(`  ${t.name}: FAILED, ${why}`);
    return { tool: t.name, command, prepare, error: why, expected };
  }
  const raw = JSON.parse(readFileSync(jsonFile, 'utf8')) as {
    results: { median: number; mean: number; stddev: number | null; min: number; max: number; times: number[] }[];
  };
  const r = raw.results[0]!;
  const time: Measured = { median: r.median, mean: r.mean, stddev: r.stddev, min: r.min, max: r.max, runs, warmup };
  const ran = existsSync(outputFile) ? t.count(readFileSync(outputFile, 'utf8')) : undefined;
  let peakKiB: number | undefined;
  if (existsSync(memFile)) {
    const values = readFileSync(memFile, 'utf8')
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((v) => v > 0);
    if (values.length > 0) peakKiB = median(values);
  }
  log(
    `  ${t.name}: median ${fmtTime(time.median)} over ${runs} run(s); ran ${ran ?? '?'} task(s) (expected ${expected})` +
      (peakKiB === undefined ? '' : `; peak ${fmtMiB(peakKiB)}`),
  );
  return { tool: t.name, command, prepare, time, ran, expected, ...(peakKiB === undefined ? {} : { peakKiB }) };
}

/** Runs the scenario's prepare, then nodegraph with --json, and counts the tasks that ran. */
async function verifyNodegraph(scenario: Scenario, dir: string, workDir: string, n: number): Promise<number | undefined> {
  if (scenario.prepare !== undefined) await must(['sh', scenario.prepare], dir);
  const file = path.join(workDir, `${n}-${scenario.key}-nodegraph.jsonl`);
  const result = await exec([...tool('nodegraph').argv, '--json'], {
    cwd: dir,
    timeoutMs: capPerRunMs(scenario.key, n),
    stdoutFile: file,
  });
  if (result.code !== 0) {
    log(`  nodegraph --json: exit ${result.code}${result.timedOut ? ' (timed out)' : ''}`);
    return undefined;
  }
  let ran = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes('"task-done"')) continue;
    const event = JSON.parse(line) as { type?: string; outcome?: string };
    if (event.type === 'task-done' && event.outcome === 'ran') ran++;
  }
  rmSync(file, { force: true });
  log(`  nodegraph --json: ${ran} task-done event(s) with outcome "ran" (expected ${scenario.expected('nodegraph', layout(n))})`);
  return ran;
}

/**
 * Whether a touched leaf costs nodegraph no more than a no-op is a comparison of two
 * figures a few per cent apart, and scenarios measured minutes apart on a shared
 * machine drift by more than that. So the two are also measured alternately: each
 * hyperfine call runs the touched run (after its prepare), then a run that is not
 * counted, then a no-op. The run between is not a no-op: the touched run recorded
 * the leaf as racy (changed just before it was read), so the next run reads it once
 * more and saves the hash cache.
 */
async function touchPairs(dir: string, n: number, workDir: string): Promise<TouchPairs | undefined> {
  const { runs } = runsFor('touch', n);
  const command = tool('nodegraph').argv.join(' ');
  const touch: number[] = [];
  const noop: number[] = [];
  const json = path.join(workDir, `${n}-touch-pairs.json`);
  // One pair first, unmeasured: as the scenarios' warm-up.
  for (let i = 0; i <= runs; i++) {
    const result = await exec(
      [HYPERFINE, '-N', '--style', 'none', '--runs', '1', '--prepare', 'sh prep-touch.sh', '--prepare', 'sh -c :', '--prepare', 'sh -c :', '--export-json', json, command, command, command],
      { cwd: dir, timeoutMs: 2 * capPerRunMs('touch', n) + 60_000 },
    );
    if (result.code !== 0 || !existsSync(json)) {
      log(`  touched and no-op alternately: FAILED (hyperfine exit ${result.code})`);
      return undefined;
    }
    const [t, , o] = (JSON.parse(readFileSync(json, 'utf8')) as { results: { times: number[] }[] }).results;
    if (i > 0) {
      touch.push(t!.times[0]!);
      noop.push(o!.times[0]!);
    }
  }
  const pairs = { pairs: runs, touch: median(touch), noop: median(noop) };
  writeFileSync(path.join(resultsDir, `${n}-touch-pairs.json`), `${JSON.stringify({ ...pairs, touchTimes: touch, noopTimes: noop })}\n`);
  log(`  nodegraph, touched and no-op alternately (${runs} pairs): ${fmtTime(pairs.touch)} against ${fmtTime(pairs.noop)}`);
  return pairs;
}

async function peakNoop(t: Tool, dir: string, n: number): Promise<number | undefined> {
  const values: number[] = [];
  for (let i = 0; i < 3; i++) {
    const file = path.join(resultsDir, `${n}-noop-${t.name}.rss`);
    const result = await exec([GNU_TIME, '-f', '%M', '-a', '-o', file, ...t.argv], {
      cwd: dir,
      timeoutMs: capPerRunMs('noop', n),
    });
    if (result.code !== 0) return undefined;
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    values.push(Number(lines.at(-1)));
  }
  return median(values);
}

async function runSize(n: number): Promise<SizeResult> {
  const shape = layout(n);
  const base = path.join(workRoot, String(n));
  const workDir = path.join(base, '_logs');
  log(`N = ${n}: ${shape.tasks} tasks; generating three copies under ${base}`);
  rmSync(base, { recursive: true, force: true });
  mkdirSync(workDir, { recursive: true });
  const dirs = {} as Record<ToolName, string>;
  for (const name of TOOLS) {
    dirs[name] = path.join(base, name);
    generate(n, dirs[name]);
    writePrepareScripts(dirs[name], tool(name), shape);
  }

  const scenarios: Partial<Record<ScenarioKey, Cell[]>> = {};
  const noopMemory: Partial<Record<ToolName, number>> = {};
  let identicalOutputs: boolean | undefined;
  let paired: TouchPairs | undefined;
  for (const key of SCENARIO_KEYS) {
    if (!wanted.has(key)) continue;
    const scenario = SCENARIOS[key];
    log(`N = ${n}: ${scenario.title}`);
    const cells: Cell[] = [];
    for (const name of TOOLS) {
      let cell = await measure(n, shape, scenario, tool(name), dirs[name], workDir);
      if (name === 'nodegraph' && cell.error === undefined && (key !== 'full' || n <= VERIFY_FULL_MAX)) {
        cell = { ...cell, jsonRan: await verifyNodegraph(scenario, dirs[name], workDir, n) };
      }
      cells.push(cell);
    }
    scenarios[key] = cells;
    if (key === 'full') {
      const outputs = TOOLS.map((name) => path.join(dirs[name], 'out', 'all'));
      identicalOutputs =
        outputs.every((f) => existsSync(f)) &&
        outputs.every((f) => readFileSync(f).equals(readFileSync(outputs[0]!)));
      log(`  out/all identical across the three tools: ${identicalOutputs}`);
    }
    if (key === 'touch') paired = await touchPairs(dirs.nodegraph, n, workDir);
    if (key === 'noop') {
      for (const name of TOOLS) {
        const kib = await peakNoop(tool(name), dirs[name], n);
        if (kib !== undefined) noopMemory[name] = kib;
      }
      log(`  peak memory, no-op: ${TOOLS.map((t) => `${t} ${noopMemory[t] === undefined ? '?' : fmtMiB(noopMemory[t])}`).join(', ')}`);
    }
  }
  if (process.env.BENCH_KEEP !== '1') {
    for (const name of TOOLS) rmSync(dirs[name], { recursive: true, force: true });
  }
  return {
    n,
    tasks: shape.tasks,
    scenarios,
    noopMemory,
    ...(identicalOutputs === undefined ? {} : { identicalOutputs }),
    ...(paired === undefined ? {} : { touchPairs: paired }),
  };
}

// ---- extras: start-up and hashing ---------------------------------------------

interface Startup {
  readonly node: Measured;
  readonly version: Measured;
}

async function startup(): Promise<Startup | undefined> {
  const file = path.join(resultsDir, 'startup.json');
  const result = await exec(
    [
      HYPERFINE,
      '-N',
      '--style',
      'basic',
      '--warmup',
      '3',
      '--runs',
      '20',
      '--export-json',
      file,
      '-n',
      'node -e 0',
      `${NODE} -e 0`,
      '-n',
      'nodegraph --version',
      `${NODEGRAPH} --version`,
    ],
    { cwd: REPO, timeoutMs: 300_000 },
  );
  if (result.code !== 0) return undefined;
  const raw = JSON.parse(readFileSync(file, 'utf8')) as { results: Measured[] };
  const pick = (r: Measured): Measured => ({ ...r, runs: 20, warmup: 3 });
  return { node: pick(raw.results[0]!), version: pick(raw.results[1]!) };
}

interface HashRun {
  readonly command: string;
  readonly ok: boolean;
  readonly output: string;
}

async function hashBench(): Promise<HashRun | undefined> {
  const script = path.join(ENGINE, 'bench', 'hash.ts');
  if (process.env.BENCH_HASH === '0' || !existsSync(script)) return undefined;
  const argv = [NODE, script];
  log('hashing: bench/hash.ts');
  const result = await exec(argv, { cwd: REPO, timeoutMs: 30 * 60_000 });
  const output = (result.stdout + (result.stderr.trim() === '' ? '' : `\n${result.stderr}`)).trim();
  writeFileSync(path.join(resultsDir, 'hash.txt'), output + '\n');
  return { command: `node bench/hash.ts`, ok: result.code === 0, output };
}

// ---- the machine ----------------------------------------------------------------

interface Machine {
  readonly date: string;
  readonly cores: number;
  readonly memory: string;
  readonly cpu: string;
  readonly kernel: string;
  readonly node: string;
  readonly ninja: string;
  readonly make: string;
  readonly hyperfine: string;
  readonly commit: string;
  readonly dirtySources: number;
  /** Files under src/ and bin/ that differ from the commit (measured as they were). */
  readonly dirtyFiles: readonly string[];
  readonly engine: string;
  readonly jobs: number;
  readonly workRoot: string;
}

async function machine(): Promise<Machine> {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const meminfo = readFileSync('/proc/meminfo', 'utf8');
  const kib = Number(/MemTotal:\s+(\d+)/.exec(meminfo)?.[1] ?? 0);
  const git = async (...args: string[]): Promise<string> => {
    try {
      return (await must(['git', ...args], REPO)).trim();
    } catch {
      return '?';
    }
  };
  const dirty = (await git('status', '--porcelain', '--', 'src', 'bin', 'bench/hash.ts'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.trim());
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
    dirtySources: dirty.length,
    dirtyFiles: dirty,
    engine: live ? 'the checkout itself (BENCH_ENGINE=live)' : `a snapshot of the checkout's bin/ and src/ in ${ENGINE}, bundled as npm pack does`,
    jobs,
    workRoot,
  };
}

// ---- the report -----------------------------------------------------------------

function fmtTime(seconds: number): string {
  if (seconds < 1) return `${(seconds * 1000).toPrecision(3)} ms`;
  if (seconds < 100) return `${seconds.toPrecision(3)} s`;
  return `${Math.round(seconds)} s`;
}

function fmtMiB(kib: number): string {
  return `${(kib / 1024).toFixed(kib < 10 * 1024 ? 1 : 0)} MiB`;
}

const fmtRatio = (r: number | undefined): string => (r === undefined || !Number.isFinite(r) ? '–' : `${r.toFixed(r < 10 ? 2 : 1)}×`);

function cellOf(result: SizeResult, key: ScenarioKey, name: ToolName): Cell | undefined {
  return result.scenarios[key]?.find((c) => c.tool === name);
}

function timeText(cell: Cell | undefined): string {
  if (cell === undefined) return '–';
  if (cell.time === undefined) return `failed: ${cell.error ?? '?'}`;
  return fmtTime(cell.time.median);
}

function ranText(cell: Cell | undefined): string {
  if (cell === undefined) return '–';
  const mark = (v: number | undefined): string => (v === undefined ? '?' : v === cell.expected ? String(v) : `**${v}** (expected ${cell.expected})`);
  return mark(cell.ran) + (cell.jsonRan === undefined ? '' : ` [json ${mark(cell.jsonRan)}]`);
}

function ratio(result: SizeResult, key: ScenarioKey, other: ToolName): number | undefined {
  const ng = cellOf(result, key, 'nodegraph')?.time?.median;
  const them = cellOf(result, key, other)?.time?.median;
  return ng === undefined || them === undefined ? undefined : ng / them;
}

function sizeTable(result: SizeResult): string {
  const lines = [
    `### N = ${result.n.toLocaleString('en-US')} leaves (${result.tasks.toLocaleString('en-US')} tasks)`,
    '',
    '| scenario | runs | nodegraph | ninja | make | nodegraph ÷ ninja | nodegraph ÷ make | tasks run: nodegraph [--json] / ninja / make |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const key of SCENARIO_KEYS) {
    const cells = result.scenarios[key];
    if (cells === undefined) continue;
    const runs = cells.find((c) => c.time !== undefined)?.time;
    lines.push(
      `| ${SCENARIOS[key].title} | ${runs === undefined ? '–' : runs.runs} | ${TOOLS.map((t) => timeText(cellOf(result, key, t))).join(' | ')} | ${fmtRatio(ratio(result, key, 'ninja'))} | ${fmtRatio(ratio(result, key, 'make'))} | ${TOOLS.map((t) => ranText(cellOf(result, key, t))).join(' / ')} |`,
    );
  }
  const memRow = (label: string, get: (t: ToolName) => number | undefined): void => {
    const [ng, nj, mk] = TOOLS.map(get);
    if (ng === undefined && nj === undefined && mk === undefined) return;
    const r = (a: number | undefined, b: number | undefined): string => fmtRatio(a === undefined || b === undefined ? undefined : a / b);
    lines.push(
      `| ${label} | | ${[ng, nj, mk].map((v) => (v === undefined ? '–' : fmtMiB(v))).join(' | ')} | ${r(ng, nj)} | ${r(ng, mk)} | |`,
    );
  };
  memRow('peak RSS, full build (median of its runs)', (t) => cellOf(result, 'full', t)?.peakKiB);
  memRow('peak RSS, no-op (median of 3)', (t) => result.noopMemory[t]);
  if (result.identicalOutputs !== undefined) {
    lines.push('', `out/all byte-identical across the three tools after the full build: ${result.identicalOutputs ? 'yes' : '**no**'}.`);
  }
  if (result.touchPairs !== undefined) {
    const p = result.touchPairs;
    lines.push(
      '',
      `nodegraph's touched run and no-op measured alternately (${p.pairs} pairs; each hyperfine call runs the touched run, one run that settles the leaf it left racy, and a no-op): ` +
        `${fmtTime(p.touch)} against ${fmtTime(p.noop)}, medians.`,
    );
  }
  return lines.join('\n');
}

interface Target {
  readonly what: string;
  readonly figure: string;
  readonly met: boolean | undefined;
}

function targetsOf(results: readonly SizeResult[]): Target[] {
  const largest = results.at(-1);
  const smallest = results.find((r) => r.n === 1000);
  const out: Target[] = [];
  if (largest === undefined) return out;
  const at = `at ${largest.n.toLocaleString('en-US')}`;
  const check = (what: string, value: number | undefined, limit: number, show: (v: number) => string): void => {
    out.push({ what, figure: value === undefined ? 'not measured' : show(value), met: value === undefined ? undefined : value <= limit });
  };
  check(`no-op ${at}: at most 2× ninja`, ratio(largest, 'noop', 'ninja'), 2, fmtRatio);
  if (smallest !== undefined) {
    check('no-op at 1,000: at most 100 ms in all', cellOf(smallest, 'noop', 'nodegraph')?.time?.median, 0.1, fmtTime);
  }
  check(`one leaf changed ${at}: at most 1.5× ninja`, ratio(largest, 'leaf', 'ninja'), 1.5, fmtRatio);
  for (const r of results) {
    const touch = cellOf(r, 'touch', 'nodegraph');
    const noop = cellOf(r, 'noop', 'nodegraph');
    const ran = touch?.jsonRan ?? touch?.ran;
    // Alternating pairs when measured (see touchPairs), else the two scenarios' medians.
    const tm = r.touchPairs?.touch ?? touch?.time?.median;
    const nm = r.touchPairs?.noop ?? noop?.time?.median;
    const how = r.touchPairs === undefined ? 'scenario medians' : `${r.touchPairs.pairs} alternating pairs`;
    const ok = ran === undefined || tm === undefined || nm === undefined ? undefined : ran === 0 && tm <= nm * 1.05;
    out.push({
      what: `one leaf touched at ${r.n.toLocaleString('en-US')}: nodegraph runs no task and takes no longer than its no-op (5% noise allowed)`,
      figure: `${ran ?? '?'} task(s); ${tm === undefined ? '?' : fmtTime(tm)} vs no-op ${nm === undefined ? '?' : fmtTime(nm)} (${how})`,
      met: ok,
    });
  }
  check(`full build ${at}: at most 1.1× make`, ratio(largest, 'full', 'make'), 1.1, fmtRatio);
  const ng = cellOf(largest, 'full', 'nodegraph')?.peakKiB;
  const nj = cellOf(largest, 'full', 'ninja')?.peakKiB;
  const ngNoop = largest.noopMemory.nodegraph;
  const njNoop = largest.noopMemory.ninja;
  const memRatio =
    ng === undefined || nj === undefined
      ? undefined
      : Math.max(ng / nj, ngNoop === undefined || njNoop === undefined ? 0 : ngNoop / njNoop);
  check(`peak memory ${at}: at most 3× ninja (the larger of full build and no-op)`, memRatio, 3, fmtRatio);
  return out;
}

/** The hashing targets, read from bench/hash.ts's text output (its format is its own: unparsed lines say so). */
function hashTargets(hash: HashRun | undefined): Target[] {
  const throughput = "hashing: at least 0.9× sha256sum's throughput (1 GiB file)";
  const unchanged = 'hashing: an unchanged file is not read again';
  if (hash === undefined) {
    return [
      { what: throughput, figure: 'bench/hash.ts not run', met: undefined },
      { what: unchanged, figure: 'bench/hash.ts not run', met: undefined },
    ];
  }
  // nodegraph's own hashing functions (sha256File*), against the sha256sum line.
  const ratios = [...hash.output.matchAll(/^(sha256File\S*).*?([\d.]+)× sha256sum/gm)].map((m) => ({ name: m[1]!, ratio: Number(m[2]) }));
  const best = ratios.sort((a, b) => b.ratio - a.ratio)[0];
  const reads = /unchanged \(warm\).*?\((\d+) read of \d+ bytes in (\d+) calls\)/.exec(hash.output);
  return [
    {
      what: throughput,
      figure: best === undefined ? 'see below' : ratios.map((r) => `${r.name} ${r.ratio.toFixed(2)}×`).join(', '),
      met: best === undefined ? undefined : best.ratio >= 0.9,
    },
    {
      what: unchanged,
      figure: reads === null ? 'see below' : `${reads[1]} read in ${reads[2]} calls (the first call reads it)`,
      met: reads === null ? undefined : Number(reads[1]) === 1,
    },
  ];
}

function report(m: Machine, results: readonly SizeResult[], start: Startup | undefined, hash: HashRun | undefined, minutes: number): string {
  const ng = tool('nodegraph');
  const rel = (p: string): string => path.relative(REPO, p);
  const lines: string[] = [
    `Run of ${m.date} (commit ${m.commit}${m.dirtySources > 0 ? ` with ${m.dirtySources} uncommitted change(s) under src/ and bin/` : ''}); took ${minutes.toFixed(0)} min. Raw data: [${rel(resultsDir)}/](${rel(resultsDir)}/).`,
    '',
    `Engine: ${live ? 'the checkout itself' : 'a snapshot of the checkout\'s `bin/` and `src/` (with `bench/hash.ts`) taken at the start of the run, so that edits during the run do not change what is measured, and bundled as `npm pack` bundles it (`scripts/build-dist.ts`): what an installed package runs'}${existsSync(path.join(REPO, 'node_modules', '.nodegraph', 'spawnd')) ? '; task commands are started by spawnd (`native/spawnd.c`, compiled by `npm ci` into `node_modules/.nodegraph/`, which the snapshot links), as in a checkout and as an installed package where its install script found a C compiler (it carries the source)' : '; no spawnd was built (no C compiler at `npm ci`): task commands are started by the Node spawn server'}${m.dirtyFiles.length > 0 ? `; uncommitted at the time: ${m.dirtyFiles.map((f) => `\`${f}\``).join(', ')}` : ''}.`,
    '',
    `Machine: ${m.cores} cores (${m.cpu}), ${m.memory} memory, ${m.kernel}; Node ${m.node}, ninja ${m.ninja}, ${m.make}, ${m.hyperfine}. Job count for all three tools: ${m.jobs} (cores + 2).`,
    '',
    'Medians; each nodegraph figure is also given as a ratio to ninja\'s and make\'s from the same run. "tasks run" is read from each tool\'s output of its last measured run (nodegraph\'s summary line, ninja\'s `[k/n]` lines, make\'s echoed commands); in brackets, nodegraph run once more with `--json` (after the same prepare), counting `task-done` events with outcome `ran` (for the full build only up to N = ' +
      VERIFY_FULL_MAX.toLocaleString('en-US') +
      ': above, that is another build of many minutes). A count in bold differs from what the scenario should run.',
    '',
  ];
  for (const r of results) lines.push(sizeTable(r), '');
  if (start !== undefined) {
    lines.push(
      '### Start-up',
      '',
      '| command | median |',
      '| --- | --- |',
      `| \`node -e 0\` | ${fmtTime(start.node.median)} |`,
      `| \`nodegraph --version\` | ${fmtTime(start.version.median)} |`,
      '',
    );
  }
  lines.push('### Targets (issue 3)', '', '| target | figure | met |', '| --- | --- | --- |');
  for (const t of targetsOf(results)) lines.push(`| ${t.what} | ${t.figure} | ${t.met === undefined ? '?' : t.met ? 'met' : '**missed**'} |`);
  for (const t of hashTargets(hash)) lines.push(`| ${t.what} | ${t.figure} | ${t.met === undefined ? '?' : t.met ? 'met' : '**missed**'} |`);
  lines.push('');
  if (hash !== undefined) {
    lines.push('### Hashing (bench/hash.ts)', '', `\`${hash.command}\`${hash.ok ? '' : ' (**failed**)'}:`, '', '```', hash.output, '```', '');
  }
  const exampleSize = results.at(-1)?.n ?? 1000;
  const { changed, touched, folder } = targets(layout(exampleSize));
  lines.push(
    '### Commands',
    '',
    `Each tool in its own copy of the generated folder (\`${m.workRoot}/<N>/<tool>\`), as the working directory; hyperfine spawns each command without a shell:`,
    '',
    '```',
    `${HYPERFINE} -N --style basic --warmup W --runs R [--prepare 'sh prep-<scenario>.sh'] --output=<file> --export-json <json> <command>`,
    '',
    `nodegraph: ${ng.argv.map((a) => (a === NODEGRAPH ? (live ? '<repo>/bin/nodegraph.js' : '<snapshot>/bin/nodegraph.js') : a)).join(' ')}`,
    '           (run as a program, with node_modules/.bin first on PATH: its launcher line starts that node as a user\'s shell does)',
    `ninja:     ${tool('ninja').argv.join(' ')}`,
    `make:      ${tool('make').argv.join(' ')}`,
    '',
    `full build: each measured as ${GNU_TIME} -f %M -a -o <rss file> <command> (peak memory from the same runs)`,
    `no-op memory: ${GNU_TIME} -f %M <command>, three times`,
    '```',
    '',
    'The prepare scripts (written into each copy by bench/run.ts; at the largest N):',
    '',
    `- full build: nodegraph \`${tool('nodegraph').clean.join('; ')}\`; ninja \`${tool('ninja').clean.join('; ')}\`; make \`${tool('make').clean.join('; ')}\`;`,
    `- one leaf changed: \`${leafPath(changed)}\` alternates between \`${leafContent(changed, 0).trim()}\` and \`${leafContent(changed, 1).trim()}\` (same size);`,
    `- one leaf touched: \`touch ${leafPath(touched)}\` (a new mtime and ctime, later than its object's; content unchanged);`,
    `- one header changed: \`${headerPath(folder)}\` alternates between two contents (folder ${folderName(folder)}).`,
    '',
  );
  return lines.join('\n');
}

function splice(markdown: string): void {
  const file = path.join(REPO, 'BENCHMARKS.md');
  const begin = '<!-- bench:begin (written by bench/run.ts) -->';
  const end = '<!-- bench:end -->';
  const block = `${begin}\n${markdown}\n${end}`;
  const existing = existsSync(file) ? readFileSync(file, 'utf8') : `# Benchmarks\n\n${begin}\n${end}\n`;
  const i = existing.indexOf(begin);
  const j = existing.indexOf(end);
  const next = i >= 0 && j > i ? existing.slice(0, i) + block + existing.slice(j + end.length) : `${existing.trimEnd()}\n\n${block}\n`;
  writeFileSync(file, next);
}

/**
 * Copies bin/, src/, scripts/, bench/hash.ts and package.json to ENGINE, with
 * node_modules linked, and bundles it as `npm pack` does (scripts/build-dist.ts):
 * what is measured is what an installed package runs.
 */
async function snapshotEngine(): Promise<void> {
  rmSync(ENGINE, { recursive: true, force: true });
  mkdirSync(path.join(ENGINE, 'bench'), { recursive: true });
  for (const part of ['bin', 'src', 'scripts']) cpSync(path.join(REPO, part), path.join(ENGINE, part), { recursive: true });
  cpSync(path.join(REPO, 'package.json'), path.join(ENGINE, 'package.json'));
  if (existsSync(path.join(REPO, 'bench', 'hash.ts'))) cpSync(path.join(REPO, 'bench', 'hash.ts'), path.join(ENGINE, 'bench', 'hash.ts'));
  symlinkSync(path.join(REPO, 'node_modules'), path.join(ENGINE, 'node_modules'));
  await must([NODE, path.join(ENGINE, 'scripts', 'build-dist.ts'), '--without-types'], ENGINE);
  if (!existsSync(path.join(ENGINE, 'dist', 'lib', 'main.js'))) throw new Error('bundling the engine made no dist/lib/main.js');
}

// ---- main -----------------------------------------------------------------------

async function main(): Promise<void> {
  for (const bin of [HYPERFINE, GNU_TIME, NODE]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing (hyperfine and time are Debian packages; npm ci installs node)`);
  }
  mkdirSync(resultsDir, { recursive: true });
  if (!live) await snapshotEngine();
  const m = await machine();
  if (m.dirtyFiles.length > 0) {
    // What was measured, when it was not a commit: the uncommitted changes (new files are listed only).
    const diff = await exec(['git', 'diff', 'HEAD', '--', 'src', 'bin', 'bench/hash.ts'], { cwd: REPO, timeoutMs: 60_000 });
    writeFileSync(path.join(resultsDir, 'engine.diff'), diff.stdout);
  }
  log(`results in ${path.relative(REPO, resultsDir)}/; sizes ${sizes.join(', ')}; -j ${jobs}; copies under ${workRoot}`);
  writeFileSync(path.join(resultsDir, 'machine.json'), JSON.stringify(m, null, 2) + '\n');

  const start = await startup();
  const results: SizeResult[] = [];
  for (const n of sizes) {
    results.push(await runSize(n));
    writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify({ machine: m, startup: start, results }, null, 2) + '\n');
  }
  const hash = await hashBench();
  const minutes = (performance.now() - t0) / 60_000;
  const markdown = report(m, results, start, hash, minutes);
  writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify({ machine: m, startup: start, results, hash, minutes }, null, 2) + '\n');
  writeFileSync(path.join(resultsDir, 'report.md'), markdown + '\n');
  if (process.env.BENCH_NO_WRITE !== '1') splice(markdown);
  process.stdout.write(markdown + '\n');
  log(`done in ${minutes.toFixed(1)} min`);
}

await main();
