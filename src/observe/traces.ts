// Traces: what a task manages found on the machine though the state records
// no such task — a folder, a unit, a running container left by a run whose
// state was lost. A task with no record is one when it has something to tear
// down (a stop or destroy action, or outputs it removes) and its check passes,
// or, without a check, one of its declared outputs exists. `status` shows
// them; `destroy --traces` tears them down with the task's declared stop and
// destroy actions, and removes its declared outputs.

import { lstatSync } from 'node:fs';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { TaskId } from '../ids.ts';
import { contentHash } from '../ids.ts';
import type { ProcessRunner } from '../process-runner.ts';
import type { TaskRecord } from '../state/record.ts';
import type { Records } from '../state/records.ts';
import { runCheck } from './check.ts';

/** The graph's tasks without a record that find what they manage in place, in graph order. */
export async function findTraces(graph: TaskGraph, records: Pick<Records, 'has'>, runner: ProcessRunner, signal: AbortSignal, jobs: number): Promise<TaskId[]> {
  const candidates = graph.ordered.filter((n) => !records.has(n.id) && tearsDown(n) && (n.decl.spec.check !== undefined || n.outputs.length > 0));
  const found = new Uint8Array(candidates.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < candidates.length) {
      const i = next++;
      const node = candidates[i]!;
      if (node.decl.spec.check === undefined) found[i] = node.outputs.some(exists) ? 1 : 0;
      else if ((await runCheck(node, runner, signal))?.ok === true) found[i] = 1;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, candidates.length)) }, worker));
  return candidates.filter((_, i) => found[i] === 1).map((n) => n.id);
}

const NONE = contentHash('0'.repeat(64));

/** A task whose check holds on a machine it never touched (a precondition, a step) leaves nothing to tear down. */
function tearsDown(node: TaskNode): boolean {
  const { spec } = node.decl;
  const some = (c: typeof spec.stop): boolean => c !== undefined && !(Array.isArray(c) && c.length === 0);
  return some(spec.stop) || some(spec.destroy) || ((spec.removeOutputs ?? true) === true && node.outputs.length > 0);
}

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** A stand-in record for a trace: its edges and teardown recipe, as the graph declares them now. */
export function traceRecord(graph: TaskGraph, id: TaskId, recipe: TaskRecord['recipe']): TaskRecord {
  const node = graph.get(id)!;
  return standInRecord(id, { needs: [...node.needs], after: [...node.after] }, recipe, 'a trace: found in place, never recorded');
}

/**
 * A record for a task that never finished a run but may have left something: enough to tear it
 * down (its edges and recipe), failed (so nothing trusts it), with `why` as its error.
 */
export function standInRecord(id: TaskId, edges: TaskRecord['edges'], recipe: TaskRecord['recipe'], why: string): TaskRecord {
  return {
    v: 1,
    id,
    status: 'failed',
    error: why,
    fingerprint: NONE,
    definition: NONE,
    inputs: {},
    upstream: {},
    outputs: {},
    outputHash: NONE,
    edges: { needs: [...edges.needs], after: [...edges.after] },
    recipe,
    startedAt: new Date(0).toISOString(),
    durationMs: 0,
  };
}
