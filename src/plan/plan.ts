// The planner: graph + observations + state in, a plan with a reason per
// task out. Pure and synchronous; observe.ts does the reading.

import type { ContentHash, TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { TaskRecord } from '../state/record.ts';
import { RecordMap } from '../state/records.ts';
import { decide, unchangedDecision, type Action, type Decision, type TaskObservation, type UpstreamState } from './decide.ts';
import { definitionOf } from './definition.ts';
import { unchangedOutputHash } from './unchanged.ts';

export type PlanAction = Action | 'destroy';

export interface PlanEntry {
  readonly id: TaskId;
  readonly action: PlanAction;
  /** The word shown to users: `create`, `restart`, `may restart`, … */
  readonly verb: string;
  readonly reasons: readonly string[];
}

export interface PlanCounts {
  readonly create: number;
  readonly update: number;
  readonly replace: number;
  readonly drift: number;
  readonly maybe: number;
  readonly destroy: number;
  readonly unchanged: number;
}

export interface Plan {
  /** Every selected task in topological order, then orphans to destroy. */
  readonly entries: readonly PlanEntry[];
  readonly counts: PlanCounts;
}

/** A plan with the decision behind each entry, for the executor to reuse. */
export interface DecidedPlan extends Plan {
  /** The executor drops each task's decision once the task is settled (execute/executor.ts). */
  readonly decisions: Map<TaskId, Decision>;
  /** What a dependent learns of each task settled unchanged: its recorded output hash, without decoding its record. */
  readonly settled: ReadonlyMap<TaskId, UpstreamState>;
}

export interface PlanOptions {
  /** Only these tasks and what they need; all tasks when empty. */
  readonly targets?: ReadonlySet<TaskId>;
  readonly replace?: ReadonlySet<TaskId>;
  /**
   * Exactly these tasks (in order), with `settled` saying what their upstream
   * outside them is: a run planned from the seal (state/delta.ts). No orphans
   * are looked for: the seal vouched that the records are the declared tasks'.
   */
  readonly only?: { readonly nodes: readonly TaskNode[]; readonly settled: ReadonlyMap<TaskId, UpstreamState> };
}

export function verbFor(node: TaskNode | undefined, action: PlanAction, onlyBecauseOf?: readonly TaskId[], stopped?: boolean): string {
  const verbs = node?.decl.spec.verbs;
  // A stopped service is started again, not restarted: the word its first run has.
  if (stopped === true && action === 'update' && verbs?.create !== undefined) return verbs.create;
  const byUpstream = verbs?.upstream;
  if (byUpstream !== undefined && onlyBecauseOf !== undefined && onlyBecauseOf.length > 0 && (action === 'update' || action === 'maybe')) {
    const words = new Set(onlyBecauseOf.map((id) => byUpstream[id]));
    const [word] = words;
    if (words.size === 1 && word !== undefined) return action === 'maybe' ? `may ${word}` : word;
  }
  switch (action) {
    case 'create':
      return verbs?.create ?? 'create';
    case 'update':
    case 'drift':
      return verbs?.update ?? 'update';
    case 'maybe':
      return `may ${verbs?.update ?? 'update'}`;
    case 'replace':
      return 'replace';
    case 'destroy':
      return 'destroy';
    case 'unchanged':
      return 'unchanged';
  }
}

const PENDING: UpstreamState = Object.freeze({ settled: false });

/** Fills `into` with the output hash of each of the node's needs; false when one is not settled. */
function settledHashes(node: TaskNode, upstreamOf: (id: TaskId) => UpstreamState, into: ContentHash[]): boolean {
  into.length = node.needs.length;
  for (let i = 0; i < node.needs.length; i++) {
    const state = upstreamOf(node.needs[i]!);
    if (!state.settled) return false;
    into[i] = state.outputHash;
  }
  return true;
}

export function selectTasks(graph: TaskGraph, targets: ReadonlySet<TaskId> | undefined): TaskNode[] {
  if (targets === undefined || targets.size === 0) return [...graph.ordered];
  const closure = graph.closure([...targets]);
  return graph.ordered.filter((n) => closure.has(n.id));
}

export function makePlan(
  graph: TaskGraph,
  observations: ReadonlyMap<TaskId, TaskObservation>,
  records: ReadonlyMap<TaskId, TaskRecord>,
  options: PlanOptions = {},
): DecidedPlan {
  const entries: PlanEntry[] = [];
  const decisions = new Map<TaskId, Decision>();
  // What a dependent learns of each task settled unchanged: made once per task, not per edge.
  const settled = new Map<TaskId, UpstreamState>(options.only?.settled ?? []);
  const upstreamOf = (id: TaskId): UpstreamState => settled.get(id) ?? PENDING;
  let recorded = 0;
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, unchanged: 0 };

  const texts = records instanceof RecordMap ? records : undefined;
  const upstreamHashes: ContentHash[] = [];

  for (const node of options.only?.nodes ?? selectTasks(graph, options.targets)) {
    const observation = observations.get(node.id);
    if (observation === undefined) throw new Error(`no observation for ${node.id}`);
    const definition = (): ContentHash => definitionOf(node, graph.dir);
    const forced = options.replace?.has(node.id) ?? false;
    // The shortcut: a record not decoded yet that says exactly what was observed (unchanged.ts).
    const text = texts?.textOf(node.id);
    let outputHash =
      text !== undefined && !forced && settledHashes(node, upstreamOf, upstreamHashes)
        ? unchangedOutputHash(text, node, definition(), observation, upstreamHashes)
        : undefined;
    let decision: Decision;
    if (outputHash !== undefined) {
      recorded++;
      decision = unchangedDecision(node, upstreamHashes);
    } else {
      const record = records.get(node.id);
      if (record !== undefined) recorded++;
      decision = decide(node, definition, observation, record, upstreamOf, forced);
      outputHash = record?.outputHash;
    }
    decisions.set(node.id, decision);
    if (decision.action === 'unchanged' && outputHash !== undefined) settled.set(node.id, { settled: true, outputHash, ran: false });
    counts[decision.action]++;
    entries.push({ id: node.id, action: decision.action, verb: verbFor(node, decision.action, decision.onlyBecauseOf, decision.stopped), reasons: decision.reasons });
  }

  // Every record belongs to a declared task when as many were met above as there are: no orphans to look for.
  if ((options.targets === undefined || options.targets.size === 0) && options.only === undefined && recorded < records.size) {
    for (const id of orphansOf(graph, records)) {
      counts.destroy++;
      entries.push({ id, action: 'destroy', verb: 'destroy', reasons: ['orphan: no longer in the Nodefile'] });
    }
  }
  return { entries, counts, decisions, settled };
}

/** Recorded tasks the Nodefile no longer declares, dependents first (the order to destroy them in). */
export function orphansOf(graph: TaskGraph, records: ReadonlyMap<TaskId, TaskRecord>): TaskId[] {
  const orphans = [...records.keys()].filter((id) => !graph.has(id));
  return teardownOrder(orphans, records);
}

/**
 * Orders recorded tasks for teardown: a task before anything it needed, using
 * the edges recorded in state (the Nodefile may no longer have them).
 */
export function teardownOrder(ids: readonly TaskId[], records: ReadonlyMap<TaskId, TaskRecord>): TaskId[] {
  const chosen = new Set(ids);
  const dependents = new Map<TaskId, number>();
  for (const id of chosen) dependents.set(id, 0);
  for (const id of chosen) {
    const edges = records.get(id)?.edges;
    for (const up of [...(edges?.needs ?? []), ...(edges?.after ?? [])]) {
      if (chosen.has(up)) dependents.set(up, (dependents.get(up) ?? 0) + 1);
    }
  }
  // Kahn's algorithm from the tasks nothing depends on, in a stable order.
  const ready = ids.filter((id) => dependents.get(id) === 0);
  const order: TaskId[] = [];
  for (let next = 0; next < ready.length; next++) {
    const id = ready[next]!;
    order.push(id);
    const edges = records.get(id)?.edges;
    for (const up of [...(edges?.needs ?? []), ...(edges?.after ?? [])]) {
      if (!chosen.has(up)) continue;
      const left = dependents.get(up)! - 1;
      dependents.set(up, left);
      if (left === 0) ready.push(up);
    }
  }
  // A recorded cycle cannot come from a valid graph; keep the rest rather than lose it.
  if (order.length < ids.length) {
    const placed = new Set(order);
    for (const id of ids) if (!placed.has(id)) order.push(id);
  }
  return order;
}

/** The plan of a whole graph found unchanged, as makePlan makes it (for a run the state's seal vouched for). */
export function unchangedPlan(ids: readonly TaskId[]): Plan {
  return wholePlan(ids, { entries: [], counts: { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, unchanged: 0 } });
}

/**
 * The whole graph's plan from one of some of its tasks (a run planned from the
 * seal, state/delta.ts): every other task is unchanged, in the order of `ids`.
 */
export function wholePlan(ids: readonly TaskId[], part: Plan): Plan {
  const planned = new Map(part.entries.map((e) => [e.id, e]));
  const entries = ids.map((id): PlanEntry => planned.get(id) ?? { id, action: 'unchanged', verb: 'unchanged', reasons: NO_REASONS });
  return { entries, counts: { ...part.counts, unchanged: part.counts.unchanged + ids.length - part.entries.length } };
}

const NO_REASONS: readonly string[] = Object.freeze([]);
