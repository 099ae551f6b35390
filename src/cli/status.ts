import { observeAndPlan, withSession } from '../engine.ts';
import { generationView } from '../operations.ts';
import type { PlanEntry } from '../plan/plan.ts';
import { reasonsLine } from '../plan/reasons.ts';
import { STOPPED, type TaskRecord } from '../state/record.ts';
import { ok } from '../util/result.ts';
import type { CliIo } from './main.ts';
import { engineOptions, paletteFor, printFailures, type Args } from './shared.ts';

export type TaskStatus = 'applied' | 'stale' | 'drifted' | 'failed' | 'stopped' | 'absent' | 'orphan';

export function statusOf(entry: PlanEntry, recorded: Pick<TaskRecord, 'status' | 'error'> | undefined): TaskStatus {
  if (entry.action === 'destroy') return 'orphan';
  if (recorded === undefined) return 'absent';
  if (recorded.status === 'failed') return recorded.error === STOPPED ? 'stopped' : 'failed';
  if (entry.action === 'drift') return 'drifted';
  return entry.action === 'unchanged' ? 'applied' : 'stale';
}

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'status');
  if ('reason' in options) return printFailures([options], io);
  const result = await withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const generation = generationView(session);
    if (!generation.ok) return generation;
    return ok({ generation: generation.value, tasks: observed.value.plan.entries().map((e) => ({ entry: e, status: statusOf(e, session.state.records.get(e.id)) })) });
  });
  if (!result.ok) return printFailures(result.error, io);
  if (args.values['json'] === true) {
    const { current, interrupted } = result.value.generation;
    io.stdout.write(`${JSON.stringify({ format: 'nodegraph-status', version: 1, generation: { current, interrupted }, tasks: result.value.tasks.map((r) => ({ id: r.entry.id, status: r.status, reasons: r.entry.reasons })) })}\n`);
    return 0;
  }
  const c = paletteFor(io);
  // A loop, not Math.max(...ids): spreading some 100,000 arguments overflows the stack.
  let width = 0;
  for (const r of result.value.tasks) width = Math.max(width, r.entry.id.length);
  const color = { applied: c.green, stale: c.yellow, drifted: c.red, failed: c.red, stopped: c.yellow, absent: c.dim, orphan: c.yellow };
  // One write for the table, not one per task.
  const lines = result.value.tasks.map(({ entry, status }) => `${entry.id.padEnd(width)}  ${color[status](status.padEnd(7))}  ${c.dim(reasonsLine(entry.reasons, `(all: nodegraph explain ${entry.id})`))}`.trimEnd());
  io.stdout.write(lines.length === 0 ? '' : `${lines.join('\n')}\n`);
  const { current, interrupted } = result.value.generation;
  io.stdout.write(current === null ? 'No generation recorded yet.\n' : `Generation ${current} is current.\n`);
  if (interrupted !== null) {
    io.stdout.write(`${c.yellow('!')} an interrupted atomic apply from ${interrupted.from === null ? 'no generation' : `generation ${interrupted.from}`} to ${interrupted.to} (${interrupted.phase}, begun ${interrupted.startedAt}): the next apply rolls it back\n`);
  }
  return 0;
}
