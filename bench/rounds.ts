// The measuring method: interleaved rounds. In each round every command of
// every block is timed by one hyperfine call, the commands of a block in an
// order rotated by one each round, so that no tool always runs first, or right
// after the same neighbour. The 1-minute load average is logged as each round
// starts. A ratio is then taken within each round, where both figures come from
// the same minutes of a shared machine, and reported as the median of those
// per-round ratios.

import { existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exec, log } from './process.ts';

export const HYPERFINE = '/usr/bin/hyperfine';
export const GNU_TIME = '/usr/bin/time';

/** One command as hyperfine times it: spawned without a shell (`-N`), in its own folder. */
export interface Command {
  /** The tool (`nodegraph`, `ninja`, `make`) or, outside a tool comparison, what the command is. */
  readonly label: string;
  readonly cwd: string;
  readonly argv: readonly string[];
  /** A script in `cwd`, run with sh before every run (warm-up runs too), not timed. */
  readonly prepare?: string;
  /** Tasks run, read from the command's output of a round's last run. */
  readonly count?: (output: string) => number | undefined;
  readonly expected?: number;
  /** Wrap the command in GNU time, for the peak RSS of every measured run. */
  readonly memory?: boolean;
}

export interface Block {
  readonly key: string;
  readonly title: string;
  readonly warmup: number;
  /** Measured runs per command per round. */
  readonly runs: number;
  /** Fewer rounds than the others measured with it (the costly scenarios). */
  readonly rounds?: number;
  /** A hung command is killed after this long per run. */
  readonly capMs: number;
  readonly commands: readonly Command[];
}

/** What one command measured over all rounds: the raw data that summary.json keeps. */
export interface Cell {
  readonly label: string;
  readonly command: string;
  readonly prepare?: string;
  /** Seconds, per round (a failed round's list is empty). */
  readonly times: number[][];
  /** Tasks run in each round's last run, as read from the command's own output. */
  readonly ran: (number | null)[];
  readonly expected?: number;
  /** nodegraph: `task-done` events with outcome `ran` in one more run with --json. */
  jsonRan?: number;
  /** Peak RSS in KiB of every measured run (GNU time's %M), when measured. */
  readonly peakKiB: number[];
  readonly errors: string[];
}

export interface BlockResult {
  readonly key: string;
  readonly title: string;
  readonly rounds: number;
  readonly warmup: number;
  readonly runs: number;
  /** The 1-minute load average as each round started. */
  readonly loadavg: number[];
  readonly cells: Cell[];
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

const rotate = <T>(list: readonly T[], by: number): T[] => list.map((_, i) => list[(i + by) % list.length]!);
const slug = (s: string): string => s.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');

/** Times every block's commands in `rounds` interleaved rounds; hyperfine's own files go to `workDir`. */
export async function measureRounds(name: string, blocks: readonly Block[], rounds: number, workDir: string): Promise<BlockResult[]> {
  const results = blocks.map(
    (b): BlockResult => ({
      key: b.key,
      title: b.title,
      rounds: Math.min(b.rounds ?? rounds, rounds),
      warmup: b.warmup,
      runs: b.runs,
      loadavg: [],
      cells: b.commands.map((c) => ({
        label: c.label,
        command: c.argv.join(' '),
        ...(c.prepare === undefined ? {} : { prepare: `sh ${c.prepare}` }),
        times: [],
        ran: [],
        ...(c.expected === undefined ? {} : { expected: c.expected }),
        peakKiB: [],
        errors: [],
      })),
    }),
  );
  for (let r = 0; r < rounds; r++) {
    const load = os.loadavg()[0]!;
    const these = blocks.filter((_, i) => r < results[i]!.rounds).map((b) => b.key);
    log(`${name}: round ${r + 1} of ${rounds} (${these.join(', ')}), load average ${load.toFixed(2)}`);
    for (const [i, block] of blocks.entries()) {
      const result = results[i]!;
      if (r >= result.rounds) continue;
      result.loadavg.push(load);
      const order = rotate(
        block.commands.map((c, j) => ({ c, cell: result.cells[j]! })),
        r,
      );
      for (const { c, cell } of order) {
        const base = path.join(workDir, slug(`${name}-${block.key}-${c.label}`));
        const measured = await hyperfine(c, block, `${base}.json`, `${base}.out`, `${base}.rss`);
        cell.times.push(measured.times);
        cell.ran.push(measured.ran ?? null);
        cell.peakKiB.push(...measured.peakKiB);
        if (measured.error !== undefined) cell.errors.push(`round ${r + 1}: ${measured.error}`);
        const mark = c.expected === undefined || measured.ran === c.expected ? '' : ` (expected ${c.expected})`;
        log(
          `  ${block.key} ${c.label}: ${measured.error ?? `median ${fmtTime(median(measured.times))} of ${measured.times.length}`}` +
            (measured.ran === undefined ? '' : `; ran ${measured.ran}${mark}`) +
            (measured.peakKiB.length === 0 ? '' : `; peak ${fmtMiB(median(measured.peakKiB))}`),
        );
      }
    }
  }
  return results;
}

interface Measured {
  readonly times: number[];
  readonly ran?: number;
  readonly peakKiB: number[];
  readonly error?: string;
}

async function hyperfine(c: Command, block: Block, jsonFile: string, outputFile: string, memFile: string): Promise<Measured> {
  rmSync(memFile, { force: true });
  rmSync(jsonFile, { force: true });
  const argv = c.memory === true ? [GNU_TIME, '-f', '%M', '-a', '-o', memFile, ...c.argv] : [...c.argv];
  const call = [
    HYPERFINE,
    '-N',
    '--style',
    'none',
    '--warmup',
    String(block.warmup),
    '--runs',
    String(block.runs),
    ...(c.prepare === undefined ? [] : ['--prepare', `sh ${c.prepare}`]),
    `--output=${outputFile}`,
    '--export-json',
    jsonFile,
    argv.join(' '),
  ];
  const timeoutMs = (block.warmup + block.runs) * block.capMs + 60_000;
  const result = await exec(call, { cwd: c.cwd, timeoutMs });
  if (result.code !== 0 || !existsSync(jsonFile)) {
    const error = result.timedOut
      ? `timed out after ${Math.round(timeoutMs / 1000)} s`
      : `hyperfine exit ${result.code}: ${result.stderr.trim().split('\n').slice(-3).join(' / ')}`;
    return { times: [], peakKiB: [], error };
  }
  const times = (JSON.parse(readFileSync(jsonFile, 'utf8')) as { results: { times: number[] }[] }).results[0]!.times;
  const ran = c.count !== undefined && existsSync(outputFile) ? c.count(readFileSync(outputFile, 'utf8')) : undefined;
  // GNU time appends a line per run, warm-up runs first: the measured runs are the last ones.
  const peakKiB = existsSync(memFile)
    ? readFileSync(memFile, 'utf8')
        .split('\n')
        .map((l) => Number(l.trim()))
        .filter((v) => v > 0)
        .slice(-block.runs)
    : [];
  return { times, ...(ran === undefined ? {} : { ran }), peakKiB };
}

// ---- reading the raw data back ------------------------------------------------------

/** The median of all measured runs, or undefined when none succeeded. */
export function medianOf(cell: Cell | undefined): number | undefined {
  const all = cell?.times.flat() ?? [];
  return all.length === 0 ? undefined : median(all);
}

/** The median over rounds of f(a's round median, b's round median), over rounds both measured. */
export function perRound(a: Cell | undefined, b: Cell | undefined, f: (a: number, b: number) => number): number | undefined {
  if (a === undefined || b === undefined) return undefined;
  const values: number[] = [];
  for (let r = 0; r < Math.min(a.times.length, b.times.length); r++) {
    const x = a.times[r]!;
    const y = b.times[r]!;
    if (x.length > 0 && y.length > 0) values.push(f(median(x), median(y)));
  }
  return values.length === 0 ? undefined : median(values);
}

export const ratioPerRound = (a: Cell | undefined, b: Cell | undefined): number | undefined => perRound(a, b, (x, y) => x / y);

export function fmtTime(seconds: number): string {
  if (!Number.isFinite(seconds)) return '–';
  if (Math.abs(seconds) < 1) return `${(seconds * 1000).toPrecision(3)} ms`;
  if (Math.abs(seconds) < 100) return `${seconds.toPrecision(3)} s`;
  return `${Math.round(seconds)} s`;
}

export function fmtMiB(kib: number): string {
  return `${(kib / 1024).toFixed(kib < 10 * 1024 ? 1 : 0)} MiB`;
}
