// Metrics for node_exporter's textfile collector: after each apply, rollback and
// status given --metrics-file FILE (or NODEGRAPH_METRICS_FILE), FILE is written
// whole (a temporary file in its folder, renamed over it), so a scrape reads the
// last file or the new one, never a mix. Its counters (runs, rollbacks) and what
// each command's last run was are kept in the state folder (metrics.json, written
// the same way), so they go on across runs and a status run still shows the last
// apply. Without the option and the variable nothing is written.

import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { stateDirOf, type EngineOptions } from '../engine.ts';
import type { Failure } from '../error.ts';
import { withLockFile } from '../state/lock.ts';
import { GenerationStore } from '../transaction/generations.ts';
import { writeDurably } from '../util/durable.ts';
import type { CliIo } from './output.ts';
import { refusalToWrite } from './own-file.ts';
import { str, type Args } from './shared.ts';

export const METRICS_ENV = 'NODEGRAPH_METRICS_FILE';
/** Where the counters are kept, in the state folder. */
export const METRICS_STATE = 'metrics.json';
/** Held while metrics.json is read, counted into and written: a few milliseconds. */
const METRICS_LOCK = 'metrics.lock';
/** How every metrics file this writes begins (renderMetrics), so one is known to be ours to overwrite. */
const METRICS_HEAD = '# HELP nodegraph_';
const METRICS_LOCK_WAIT_MS = 5000;

export const METRICS_COMMANDS = ['apply', 'rollback', 'status'] as const;
export type MetricsCommand = (typeof METRICS_COMMANDS)[number];
/**
 * How a run ended. success: every task settled (status: every task applied or running);
 * unsettled: status found a task that is not; failed: a task failed (a rollback command:
 * and was undone); rolled-back: an atomic apply failed and was undone; rollback-failed:
 * its undoing failed too; canceled: interrupted; error: the run could not go (a bad
 * Nodefile, a held lock, …).
 */
export const OUTCOMES = ['success', 'unsettled', 'failed', 'rolled-back', 'rollback-failed', 'canceled', 'error'] as const;
export type Outcome = (typeof OUTCOMES)[number];
/** The outcomes a command's runs can have: each is a sample, 0 until it happens. */
export const OUTCOMES_OF: Readonly<Record<MetricsCommand, readonly Outcome[]>> = {
  apply: OUTCOMES.filter((o) => o !== 'unsettled'),
  rollback: OUTCOMES.filter((o) => o !== 'unsettled'),
  status: ['success', 'unsettled', 'error'],
};
/** Why a rollback ran: an atomic apply that failed, an interrupted one undone by the next run, `nodegraph rollback`. */
export const ROLLBACK_CAUSES = ['failed-apply', 'interrupted-apply', 'command'] as const;
export type RollbackCause = (typeof ROLLBACK_CAUSES)[number];

export interface MetricsRun {
  readonly command: MetricsCommand;
  readonly outcome: Outcome;
  /** Milliseconds since the epoch. */
  readonly startedAt: number;
  readonly endedAt: number;
  /** apply and rollback: tasks by result (ran, failed, …); status: tasks by status. */
  readonly tasks: Readonly<Record<string, number>>;
  readonly rollbacks?: readonly RollbackCause[];
}

interface LastRun {
  readonly outcome: Outcome;
  readonly endedAt: number;
  readonly durationMs: number;
  readonly tasks: Readonly<Record<string, number>>;
}

/** metrics.json: what the textfile is made from. */
interface Kept {
  readonly format: 'nodegraph-metrics';
  readonly version: 1;
  /** `${command} ${outcome}` → runs. */
  readonly runs: Record<string, number>;
  readonly rollbacks: Record<string, number>;
  readonly last: Partial<Record<MetricsCommand, LastRun>>;
}

const fresh = (): Kept => ({ format: 'nodegraph-metrics', version: 1, runs: {}, rollbacks: {}, last: {} });

/** The file asked for (the option, else the variable), undefined for none, or why it cannot be written. */
export function metricsTarget(args: Args, io: CliIo, command: MetricsCommand, options: EngineOptions): string | undefined | Failure {
  const given = str(args.values['metrics-file']) ?? (io.env['NODEGRAPH_METRICS_FILE'] || undefined);
  if (given === undefined) return undefined;
  const file = path.resolve(io.cwd, given);
  const from = str(args.values['metrics-file']) === undefined ? METRICS_ENV : '--metrics-file';
  // A missing folder is refused here too, as are the state, the Nodefile and a file it did not write.
  const refused = refusalToWrite(file, { what: 'a metrics file', begins: METRICS_HEAD, stateDir: stateDirOf(options), nodefile: options.nodefile });
  return refused === undefined ? file : { reason: 'usage', command, message: `${from} ${given}: ${refused}` };
}

/** A whole number of each of `names`, from a parsed object (0 for what is missing or not a count). */
const counts = (value: unknown, names: readonly string[]): Record<string, number> => {
  const object = typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  return Object.fromEntries(names.map((n) => [n, Number.isSafeInteger(object[n]) && (object[n] as number) >= 0 ? (object[n] as number) : 0]));
};

/** metrics.json as kept, or a fresh start when there is none; `damaged` when there was one that cannot be read. */
function readKept(file: string): { kept: Kept; damaged: boolean } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { kept: fresh(), damaged: false };
  }
  try {
    const parsed = JSON.parse(text) as Partial<Kept>;
    if (parsed.format !== 'nodegraph-metrics' || parsed.version !== 1) return { kept: fresh(), damaged: true };
    const runNames = METRICS_COMMANDS.flatMap((c) => OUTCOMES_OF[c].map((o) => `${c} ${o}`));
    const last: Partial<Record<MetricsCommand, LastRun>> = {};
    for (const command of METRICS_COMMANDS) {
      const run = (parsed.last as Record<string, Partial<LastRun>> | undefined)?.[command];
      if (run === undefined || !OUTCOMES_OF[command].includes(run.outcome as Outcome) || !Number.isFinite(run.endedAt) || !Number.isFinite(run.durationMs)) continue;
      last[command] = { outcome: run.outcome!, endedAt: run.endedAt!, durationMs: run.durationMs!, tasks: counts(run.tasks, Object.keys(run.tasks ?? {})) };
    }
    return { kept: { ...fresh(), runs: counts(parsed.runs, runNames), rollbacks: counts(parsed.rollbacks, ROLLBACK_CAUSES), last }, damaged: false };
  } catch {
    return { kept: fresh(), damaged: true };
  }
}

/**
 * Counts `run` into the state folder's metrics.json (when the folder exists: a run that
 * failed before making it keeps nothing) and writes the textfile. The count is a
 * read-modify-write under metrics.lock, so two runs ending at once both count. A write
 * that fails is a warning on stderr: the run's own outcome and exit code stand.
 */
export function recordMetrics(file: string, stateDir: string, run: MetricsRun, io: Pick<CliIo, 'stderr'>): void {
  const keptFile = path.join(stateDir, METRICS_STATE);
  let stateExists = false;
  try {
    stateExists = statSync(stateDir).isDirectory();
  } catch {
    // no state folder yet
  }
  const count = (): Kept => {
    const { kept, damaged } = stateExists ? readKept(keptFile) : { kept: fresh(), damaged: false };
    if (damaged) io.stderr.write(`warning: ${keptFile} cannot be read: the metrics' counters start again from 0\n`);
    countInto(kept, run);
    try {
      if (stateExists) writeDurably(keptFile, `${JSON.stringify(kept)}\n`);
    } catch (error) {
      io.stderr.write(`warning: ${keptFile} could not be written (${(error as Error).message}): the metrics' counters were not kept\n`);
    }
    return kept;
  };
  let kept: Kept;
  if (!stateExists) kept = count();
  else {
    const locked = withLockFile(path.join(stateDir, METRICS_LOCK), 'nodegraph metrics', METRICS_LOCK_WAIT_MS, count);
    if (locked.ok && locked.value !== 'busy') kept = locked.value;
    else {
      const why = locked.ok ? `${METRICS_LOCK} was held for ${METRICS_LOCK_WAIT_MS / 1000} s` : locked.error.message;
      io.stderr.write(`warning: ${keptFile} was not counted into (${why}): this run's metrics were not kept\n`);
      kept = readKept(keptFile).kept;
    }
  }
  const generation = stateExists ? (new GenerationStore(stateDir).current() ?? 0) : 0;
  try {
    // Readable by node_exporter, which runs as a user of its own.
    writeDurably(file, renderMetrics(kept, generation), 0o644);
  } catch (error) {
    io.stderr.write(`warning: ${file} could not be written: ${(error as Error).message}\n`);
  }
}

/** `run` counted into `kept`, which it returns. */
function countInto(kept: Kept, run: MetricsRun): Kept {
  const key = `${run.command} ${run.outcome}`;
  kept.runs[key] = (kept.runs[key] ?? 0) + 1;
  for (const cause of run.rollbacks ?? []) kept.rollbacks[cause] = (kept.rollbacks[cause] ?? 0) + 1;
  kept.last[run.command] = { outcome: run.outcome, endedAt: run.endedAt, durationMs: run.endedAt - run.startedAt, tasks: run.tasks };
  return kept;
}

const seconds = (ms: number): string => String(ms / 1000);
const labels = (pairs: Record<string, string>): string =>
  `{${Object.entries(pairs)
    .map(([k, v]) => `${k}="${v.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n')}"`)
    .join(',')}}`;

/** The textfile: Prometheus's text format, one HELP and TYPE per metric. */
export function renderMetrics(kept: Kept, generation: number): string {
  const out: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, samples: readonly (readonly [Record<string, string>, string])[]): void => {
    if (samples.length === 0) return;
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [l, v] of samples) out.push(`${name}${Object.keys(l).length === 0 ? '' : labels(l)} ${v}`);
  };
  const ran = METRICS_COMMANDS.filter((c) => kept.last[c] !== undefined).map((c) => [c, kept.last[c]!] as const);
  metric('nodegraph_last_run_timestamp_seconds', 'gauge', 'When the last run of each command ended, in seconds since the epoch.', ran.map(([command, r]) => [{ command }, seconds(r.endedAt)]));
  metric('nodegraph_last_run_duration_seconds', 'gauge', 'How long the last run of each command took.', ran.map(([command, r]) => [{ command }, seconds(r.durationMs)]));
  metric(
    'nodegraph_last_run_outcome',
    'gauge',
    'How the last run of each command ended: 1 for its outcome, 0 for the others.',
    ran.flatMap(([command, r]) => OUTCOMES_OF[command].map((outcome) => [{ command, outcome }, r.outcome === outcome ? '1' : '0'] as const)),
  );
  metric(
    'nodegraph_last_run_tasks',
    'gauge',
    'Tasks of the last apply and rollback, by result.',
    ran.filter(([command]) => command !== 'status').flatMap(([command, r]) => Object.entries(r.tasks).map(([result, n]) => [{ command, result }, String(n)] as const)),
  );
  const status = kept.last.status;
  metric('nodegraph_tasks', 'gauge', 'Tasks by status, as the last status run found them.', status === undefined ? [] : Object.entries(status.tasks).map(([s, n]) => [{ status: s }, String(n)]));
  metric('nodegraph_generation', 'gauge', 'The generation the machine is at (0: none recorded yet).', [[{}, String(generation)]]);
  metric('nodegraph_rollbacks_total', 'counter', 'Rollbacks run in this state folder, by cause.', ROLLBACK_CAUSES.map((cause) => [{ cause }, String(kept.rollbacks[cause] ?? 0)]));
  metric(
    'nodegraph_runs_total',
    'counter',
    'Runs of each command in this state folder, by outcome.',
    METRICS_COMMANDS.flatMap((command) => OUTCOMES_OF[command].map((outcome) => [{ command, outcome }, String(kept.runs[`${command} ${outcome}`] ?? 0)] as const)),
  );
  return `${out.join('\n')}\n`;
}

/** An apply's or a rollback's run, from the engine's result. */
export function applyMetricsRun(
  command: 'apply' | 'rollback',
  startedAt: number,
  result: { readonly ok: true; readonly value: import('../apply.ts').ApplySummary } | { readonly ok: false; readonly error: readonly Failure[] },
  aborted: boolean,
): MetricsRun {
  const endedAt = Date.now();
  if (!result.ok) {
    const undone = result.error.find((f) => f.reason === 'atomic-apply-failed');
    const tasks = { ran: 0, failed: 0, skipped: 0, canceled: 0, up_to_date: 0, destroyed: 0 };
    if (undone === undefined) return { command, outcome: result.error.some((f) => f.reason === 'interrupted') ? 'canceled' : 'error', startedAt, endedAt, tasks };
    return { command, outcome: undone.rolledBack ? 'rolled-back' : 'rollback-failed', startedAt, endedAt, tasks, rollbacks: ['failed-apply'] };
  }
  const s = result.value;
  const outcome: Outcome = s.canceled.length > 0 || aborted ? 'canceled' : s.failed.length > 0 ? 'failed' : 'success';
  const rollbacks: RollbackCause[] = [];
  if (s.recovered?.outcome === 'rolled-back') rollbacks.push('interrupted-apply');
  if (command === 'rollback' && outcome === 'success') rollbacks.push('command');
  const tasks = { ran: s.ran.length, failed: s.failed.length, skipped: s.skipped.length, canceled: s.canceled.length, up_to_date: s.upToDate, destroyed: s.destroyed.length };
  return { command, outcome, startedAt, endedAt, tasks, rollbacks };
}
