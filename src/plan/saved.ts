// A saved plan is bound to what it observed: every task's definition and
// observed hashes, and the state. Applying it after any of that changed is
// refused, with the list of what changed. Pure: operations.ts reads and
// writes the plan file.

import type { Failure } from '../error.ts';
import type { ContentHash, TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { hashValue } from '../hash/value.ts';
import type { Records } from '../state/records.ts';
import { err, ok, type Result } from '../util/result.ts';
import type { TaskObservation } from './decide.ts';
import { definitionOf } from './definition.ts';
import type { Plan, PlanDocument } from './plan.ts';

export const PLAN_FORMAT = 'nodegraph-plan';
export const PLAN_VERSION = 1;

export interface SavedPlan {
  readonly format: typeof PLAN_FORMAT;
  readonly version: typeof PLAN_VERSION;
  readonly nodefile: string;
  readonly targets: readonly string[];
  readonly replace: readonly string[];
  readonly createdAt: string;
  readonly state: ContentHash;
  readonly tasks: Readonly<Record<string, ContentHash>>;
  readonly plan: PlanDocument;
}

export function observedDigest(graph: TaskGraph, node: TaskNode, observation: TaskObservation): ContentHash {
  return hashValue({
    definition: definitionOf(node, graph.dir),
    inputs: Object.fromEntries(observation.inputs),
    outputs: Object.fromEntries(observation.outputs),
    check: observation.check?.ok ?? null,
  });
}

export function stateDigest(records: Records): ContentHash {
  const entries = [...records.values()]
    .map((r) => [r.id, r.status, r.fingerprint, r.outputHash])
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0));
  return hashValue(entries);
}

export function bindPlan(
  graph: TaskGraph,
  selected: readonly TaskNode[],
  observations: ReadonlyMap<TaskId, TaskObservation>,
  records: Records,
  plan: Plan,
  options: { targets: readonly string[]; replace: readonly string[]; createdAt: string },
): SavedPlan {
  const tasks: Record<string, ContentHash> = {};
  for (const node of selected) tasks[node.id] = observedDigest(graph, node, observations.get(node.id)!);
  return {
    format: PLAN_FORMAT,
    version: PLAN_VERSION,
    nodefile: graph.file,
    targets: options.targets,
    replace: options.replace,
    createdAt: options.createdAt,
    state: stateDigest(records),
    tasks,
    plan: plan.toJSON(),
  };
}

/** What differs between a saved plan and what is observed now; empty when it still holds. */
export function planChanges(saved: SavedPlan, current: SavedPlan): string[] {
  const changes: string[] = [];
  if (saved.state !== current.state) changes.push('the state changed (another apply or destroy ran)');
  for (const [id, digest] of Object.entries(current.tasks)) {
    const before = saved.tasks[id];
    if (before === undefined) changes.push(`task ${id} is new`);
    else if (before !== digest) changes.push(`task ${id}: its definition, inputs, outputs or check changed`);
  }
  for (const id of Object.keys(saved.tasks)) if (!(id in current.tasks)) changes.push(`task ${id} is gone`);
  return changes;
}

/** The saved plan in `text`, the content of the plan file `file`. */
export function parseSavedPlan(file: string, text: string): Result<SavedPlan, Failure> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return err({ reason: 'plan-file-invalid', path: file, message: (error as Error).message });
  }
  const p = parsed as Partial<SavedPlan> | null;
  if (p === null || typeof p !== 'object' || p.format !== PLAN_FORMAT) {
    return err({ reason: 'plan-file-invalid', path: file, message: 'not a nodegraph plan file' });
  }
  if (p.version !== PLAN_VERSION) {
    return err({ reason: 'plan-file-invalid', path: file, message: `plan format version ${String(p.version)}, this nodegraph reads ${PLAN_VERSION}` });
  }
  return ok(p as SavedPlan);
}
