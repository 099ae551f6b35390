import { observeAndPlan, stateDirOf, withSession } from '../engine.ts';
import type { LockHolder } from '../error.ts';
import { generationView } from '../operations.ts';
import { orphanLine, underWayLine } from './transaction-lines.ts';
import type { PlanEntry } from '../plan/plan.ts';
import { reasonsLine } from '../plan/reasons.ts';
import { liveHolder } from '../state/open.ts';
import { readLock } from '../state/lock.ts';
import type { TaskRecord } from '../state/record.ts';
import { STOPPED } from '../types.ts';
import { ok } from '../util/result.ts';
import { findTraces } from '../observe/traces.ts';
import { GenerationStore } from '../transaction/generations.ts';
import type { TaskId } from '../ids.ts';
import type { CliIo } from './output.ts';
import { metricsTarget, recordMetrics } from './metrics.ts';
import { engineOptions, paletteFor, printFailures, type Args } from './shared.ts';

export const TASK_STATUSES = ['applied', 'running', 'stale', 'drifted', 'failed', 'stopped', 'absent', 'trace', 'orphan'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/**
 * A task's status. `running`: applied, and what it started (it has a stop
 * action) is in place. `trace`: never recorded, yet its check finds what it
 * manages in place (a state that was lost: `destroy --traces`).
 */
export function statusOf(
  entry: PlanEntry,
  recorded: Pick<TaskRecord, 'status' | 'error'> | undefined,
  task: { readonly stops?: boolean; readonly trace?: boolean } = {},
): TaskStatus {
  if (entry.action === 'destroy') return 'orphan';
  if (recorded === undefined) return task.trace === true ? 'trace' : 'absent';
  if (recorded.status === 'failed') return recorded.error === STOPPED ? 'stopped' : 'failed';
  if (entry.action === 'drift') return 'drifted';
  if (entry.action !== 'unchanged') return 'stale';
  return task.stops === true ? 'running' : 'applied';
}

/**
 * The state lock as status reports it: `held` by a process running on this
 * host, `stale` (its holder is gone: the next apply takes it over),
 * `elsewhere` (held from another host, whose processes cannot be seen from
 * here), or `unreadable`.
 */
export type LockStatus =
  | { readonly state: 'held' | 'stale' | 'elsewhere'; readonly holder: LockHolder }
  | { readonly state: 'unreadable'; readonly message: string };

function lockStatus(stateDir: string): LockStatus | undefined {
  const read = readLock(stateDir);
  if (!read.ok || read.value === undefined) return undefined;
  const { holder, otherHost, unreadable } = read.value;
  if (holder === undefined) return { state: 'unreadable', message: unreadable?.message ?? 'unreadable' };
  if (otherHost) return { state: 'elsewhere', holder };
  return { state: liveHolder(stateDir) === undefined ? 'stale' : 'held', holder };
}

function lockLine(lock: LockStatus): string {
  if (lock.state === 'unreadable') return `Lock: an unreadable lock file (${lock.message}); if no nodegraph is running, \`nodegraph unlock\` removes it.`;
  const h = lock.holder;
  const who = `pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}`;
  if (lock.state === 'held') return `Lock: held by ${who}.`;
  if (lock.state === 'stale') return `Lock: left by ${who}, which is no longer running; the next apply takes it over.`;
  return `Lock: held from another host by ${who}; if that run is gone, \`nodegraph unlock\` removes it.`;
}

export async function run(args: Args, io: CliIo): Promise<number> {
  const startedAt = Date.now();
  const options = engineOptions(args, io, 'status');
  if ('reason' in options) return printFailures([options], io);
  const metrics = metricsTarget(args, io, 'status', options);
  if (typeof metrics === 'object') return printFailures([metrics], io);
  const result = await withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session, { shown: true });
    if (!observed.ok) return observed;
    const generation = generationView(session);
    if (!generation.ok) return generation;
    const records = session.state.records;
    const traces = new Set(await findTraces(session.graph, records, session.runner, session.signal, session.jobs));
    const stops = (id: TaskId): boolean => session.graph.get(id)?.decl.spec.stop !== undefined;
    const tasks = observed.value.plan.entries().map((e) => ({ entry: e, status: statusOf(e, records.get(e.id), { stops: stops(e.id), trace: traces.has(e.id) }) }));
    return ok({ generation: generation.value, tasks });
  });
  if (!result.ok) {
    if (metrics !== undefined) recordMetrics(metrics, stateDirOf(options), { command: 'status', outcome: 'error', startedAt, endedAt: Date.now(), tasks: {} }, io);
    return printFailures(result.error, io);
  }
  const { tasks, generation } = result.value;
  const counts = Object.fromEntries(TASK_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  for (const r of tasks) counts[r.status]++;
  const lock = lockStatus(stateDirOf(options));
  const settled = counts.applied + counts.running === tasks.length;
  if (metrics !== undefined) recordMetrics(metrics, stateDirOf(options), { command: 'status', outcome: settled ? 'success' : 'unsettled', startedAt, endedAt: Date.now(), tasks: counts }, io);
  const code = args.values['detailed-exitcode'] === true && !settled ? 2 : 0;
  const { current, interrupted, underWay, orphanedTransaction } = generation;
  // What holds of the state as a whole sits beside the tasks: the generation and the lock.
  if (args.values['json'] === true) {
    const shown = tasks.map((r) => ({ id: r.entry.id, status: r.status, reasons: r.entry.reasons, reasonDetails: r.entry.reasonDetails }));
    io.stdout.write(`${JSON.stringify({ format: 'nodegraph-status', version: 1, generation: { current, interrupted, underWay, orphanedTransaction }, tasks: shown, counts, lock: lock ?? null })}\n`);
    return code;
  }
  const c = paletteFor(io);
  // A loop, not Math.max(...ids): spreading some 100,000 arguments overflows the stack.
  let width = 0;
  for (const r of tasks) width = Math.max(width, r.entry.id.length);
  const color = { applied: c.green, running: c.green, stale: c.yellow, drifted: c.red, failed: c.red, stopped: c.yellow, absent: c.dim, trace: c.red, orphan: c.yellow };
  // One write for the table, not one per task.
  const lines = tasks.map(({ entry, status }) => `${entry.id.padEnd(width)}  ${color[status](status.padEnd(7))}  ${c.dim(reasonsLine(entry.reasons, `(all: nodegraph explain ${entry.id})`))}`.trimEnd());
  const shown = TASK_STATUSES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${s}`);
  const n = tasks.length;
  lines.push(`Status: ${n} task${n === 1 ? '' : 's'}${shown.length === 0 ? '' : `: ${shown.join(', ')}`}.`);
  // None current with some kept: a whole destroy took what was applied, or no apply has held yet.
  const kept = current === null && new GenerationStore(stateDirOf(options)).numbers().length > 0;
  lines.push(current !== null ? `Generation ${current} is current.` : kept ? 'No generation is current (`nodegraph generations` lists those kept).' : 'No generation recorded yet.');
  if (interrupted !== null) {
    lines.push(`${c.yellow('!')} an interrupted atomic apply from ${interrupted.from === null ? 'no generation' : `generation ${interrupted.from}`} to ${interrupted.to} (${interrupted.phase}, begun ${interrupted.startedAt}): the next apply rolls it back`);
  }
  if (underWay !== null) lines.push(`${c.yellow('!')} ${underWayLine(underWay)}`);
  if (orphanedTransaction !== null) lines.push(`${c.yellow('!')} ${orphanLine(orphanedTransaction, io.cwd)}`);
  if (counts.trace > 0) lines.push(`${c.yellow('!')} ${counts.trace} task${counts.trace === 1 ? '' : 's'} found in place but not in the state (a state that was lost?): \`nodegraph destroy --traces\` tears them down.`);
  if (lock !== undefined) lines.push(lockLine(lock));
  io.stdout.write(`${lines.join('\n')}\n`);
  return code;
}
