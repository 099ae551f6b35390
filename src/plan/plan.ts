// The planner: graph + observations + state in, a plan with a reason per
// task out. Pure and synchronous; observe.ts does the reading.

import type { TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { TaskMap } from '../graph/task-map.ts';
import type { TaskRecord } from '../state/record.ts';
import { STOPPED } from '../types.ts';
import type { Records } from '../state/records.ts';
import { decide, type Action, type Decision, type TaskObservation, type UpstreamState } from './decide.ts';
import { definitionOf } from './definition.ts';
import { reasonText, type ReasonDetail } from './reasons.ts';
import { teardownOrder, type RecordReader } from './teardown.ts';

export type PlanAction = Action | 'destroy';

export interface PlanEntry {
  readonly id: TaskId;
  readonly action: PlanAction;
  /** The word shown to users: `create`, `restart`, `may restart`, … */
  readonly verb: string;
  readonly reasons: readonly string[];
  /** The reasons as data, one for one (plan/reasons.ts ReasonDetail). */
  readonly reasonDetails: readonly ReasonDetail[];
}

export interface PlanCounts {
  readonly create: number;
  readonly update: number;
  readonly replace: number;
  readonly drift: number;
  readonly maybe: number;
  readonly destroy: number;
  /** Orphans with `retire: 'stop'`: stopped and kept in place, not destroyed. */
  readonly stop: number;
  readonly unchanged: number;
}

export interface Plan {
  /** How many entries: every selected task in topological order, then orphans to destroy. */
  readonly size: number;
  readonly counts: PlanCounts;
  /** The entries, each made as it is reached (a plan keeps them in columns, not as an object each). */
  [Symbol.iterator](): Iterator<PlanEntry>;
  /** The entries as a list, made on each call. */
  entries(): PlanEntry[];
  /** What `plan --json` and the JSON events show of it. */
  toJSON(): PlanDocument;
}

/** A plan as data: what `plan --json` prints and `plan --out` saves. */
export interface PlanDocument {
  readonly entries: readonly PlanEntry[];
  readonly counts: PlanCounts;
}

const ACTIONS: readonly PlanAction[] = ['create', 'update', 'replace', 'drift', 'maybe', 'destroy', 'unchanged'];
const NO_REASONS: readonly never[] = Object.freeze([]);

/**
 * A plan in columns: each entry's action as a byte, its reasons as a shared
 * list (a decision's own), and its verb only where it is not the action's word.
 * Ids come from the list the plan was made over: the graph's nodes, or a run's ids.
 */
class PlanTable implements Plan {
  readonly size: number;
  readonly counts: PlanCounts;
  readonly #idAt: (index: number) => TaskId;
  readonly #actions: Uint8Array;
  readonly #verbs: ReadonlyMap<number, string>;
  /** Undefined when no entry has a reason (a plan of a graph found unchanged). */
  readonly #reasons: readonly (readonly string[])[] | undefined;
  readonly #details: readonly (readonly ReasonDetail[])[] | undefined;

  constructor(columns: Columns, idAt: (index: number) => TaskId, counts: PlanCounts) {
    this.size = columns.size;
    this.#idAt = idAt;
    this.#actions = columns.actions;
    this.#verbs = columns.verbs;
    this.#reasons = columns.reasons;
    this.#details = columns.details;
    this.counts = counts;
  }

  entryAt(index: number): PlanEntry {
    const action = ACTIONS[this.#actions[index]!]!;
    return {
      id: this.#idAt(index),
      action,
      verb: this.#verbs.get(index) ?? verbFor(undefined, action),
      reasons: this.#reasons?.[index] ?? NO_REASONS,
      reasonDetails: this.#details?.[index] ?? NO_REASONS,
    };
  }

  *[Symbol.iterator](): Iterator<PlanEntry> {
    for (let i = 0; i < this.size; i++) yield this.entryAt(i);
  }

  entries(): PlanEntry[] {
    return Array.from({ length: this.size }, (_, i) => this.entryAt(i));
  }

  toJSON(): PlanDocument {
    return { entries: this.entries(), counts: this.counts };
  }
}

class DecidedPlanTable extends PlanTable implements DecidedPlan {
  readonly decisions: Map<TaskId, Decision>;
  readonly undecided: Plan;
  constructor(columns: Columns, idAt: (index: number) => TaskId, counts: PlanCounts, decisions: Map<TaskId, Decision>) {
    super(columns, idAt, counts);
    this.decisions = decisions;
    this.undecided = new PlanTable(columns, idAt, counts);
  }
}

interface Columns {
  readonly size: number;
  readonly actions: Uint8Array;
  readonly verbs: ReadonlyMap<number, string>;
  readonly reasons: readonly (readonly string[])[] | undefined;
  readonly details: readonly (readonly ReasonDetail[])[] | undefined;
}

/** Collects a plan's entries in order, as the columns of a PlanTable. */
class PlanColumns implements Columns {
  size = 0;
  actions: Uint8Array;
  readonly verbs = new Map<number, string>();
  reasons: (readonly string[])[] | undefined;
  details: (readonly ReasonDetail[])[] | undefined;

  constructor(expected: number) {
    this.actions = new Uint8Array(expected);
  }

  add(action: PlanAction, verb: string, reasons: readonly string[], details: readonly ReasonDetail[]): void {
    const at = this.size++;
    if (at === this.actions.length) {
      const grown = new Uint8Array(Math.max(16, at * 2));
      grown.set(this.actions);
      this.actions = grown;
    }
    this.actions[at] = ACTIONS.indexOf(action);
    if (verb !== verbFor(undefined, action)) this.verbs.set(at, verb);
    if (reasons.length > 0 && this.reasons === undefined) {
      this.reasons = new Array<readonly string[]>(at).fill(NO_REASONS);
      this.details = new Array<readonly ReasonDetail[]>(at).fill(NO_REASONS);
    }
    this.reasons?.push(reasons);
    this.details?.push(details);
  }
}

export interface DecidedPlan extends Plan {
  /** The executor drops each task's decision once the task is settled (execute/scheduler.ts). */
  readonly decisions: Map<TaskId, Decision>;
  /** The same plan without the decisions: what events and summaries carry (its columns are shared). */
  readonly undecided: Plan;
}

export interface PlanOptions {
  /** Only these tasks and what they need; all tasks when empty. */
  readonly targets?: ReadonlySet<TaskId>;
  readonly replace?: ReadonlySet<TaskId>;
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

/** The tasks to plan, in order: the graph's own list when there are no targets (a plan keeps it for its ids). */
export function selectTasks(graph: TaskGraph, targets: ReadonlySet<TaskId> | undefined): readonly TaskNode[] {
  if (targets === undefined || targets.size === 0) return graph.ordered;
  const closure = graph.closure([...targets]);
  return graph.ordered.filter((n) => closure.has(n.id));
}

export function makePlan(
  graph: TaskGraph,
  observations: ReadonlyMap<TaskId, TaskObservation>,
  records: Records,
  options: PlanOptions = {},
): DecidedPlan {
  const nodes = selectTasks(graph, options.targets);
  const columns = new PlanColumns(nodes.length);
  const orphans: TaskId[] = [];
  const decisions = new TaskMap<Decision>(graph);
  // Which tasks were found unchanged, by order: a dependent learns the output hash from the record.
  const unchanged = new Uint8Array(graph.size);
  const upstreamOf = (id: TaskId): UpstreamState => {
    const up = graph.get(id);
    const outputHash = up === undefined || unchanged[up.order] === 0 ? undefined : records.outputHash(id);
    return outputHash === undefined ? PENDING : { settled: true, outputHash, ran: false };
  };
  let recorded = 0;
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, stop: 0, unchanged: 0 };

  for (const node of nodes) {
    const observation = observations.get(node.id);
    if (observation === undefined) throw new Error(`no observation for ${node.id}`);
    if (records.has(node.id)) recorded++;
    const decision = decide(node, () => definitionOf(node, graph.dir), observation, records, upstreamOf, options.replace?.has(node.id) ?? false);
    decisions.set(node.id, decision);
    if (decision.action === 'unchanged') unchanged[node.order] = 1;
    counts[decision.action]++;
    columns.add(decision.action, verbFor(node, decision.action, decision.onlyBecauseOf, decision.stopped), decision.reasons, decision.details);
  }

  // Every record belongs to a declared task when as many were met above as there are: no orphans to look for.
  if ((options.targets === undefined || options.targets.size === 0) && recorded < records.size) {
    for (const id of orphansOf(graph, records)) {
      orphans.push(id);
      const retired = records.get(id)?.recipe.retire === 'stop';
      counts[retired ? 'stop' : 'destroy']++;
      columns.add('destroy', retired ? 'stop' : 'destroy', retired ? ORPHAN_KEPT : ORPHAN, retired ? ORPHAN_KEPT_DETAILS : ORPHAN_DETAILS);
    }
  }
  return new DecidedPlanTable(columns, (i) => (i < nodes.length ? nodes[i]!.id : orphans[i - nodes.length]!), counts, decisions);
}

/**
 * Recorded tasks the Nodefile no longer declares, dependents first (the order
 * to retire them in), less those already retired in place.
 */
export function orphansOf(graph: TaskGraph, records: RecordReader): TaskId[] {
  const orphans = [...records.keys()].filter((id) => !graph.has(id) && !retiredInPlace(records.get(id)));
  return teardownOrder(orphans, records);
}

/** A task with `retire: 'stop'` that has nothing left to stop: kept as it is until declared again or destroyed. */
export function retiredInPlace(record: TaskRecord | undefined): boolean {
  if (record?.recipe.retire !== 'stop') return false;
  return record.recipe.stop.length === 0 || record.error === STOPPED;
}

/** A plan of these entries, counted (a plan read back as data, or made in a test); details left out are none. */
export function listedPlan(entries: readonly (Omit<PlanEntry, 'reasonDetails'> & { readonly reasonDetails?: readonly ReasonDetail[] })[]): Plan {
  const columns = new PlanColumns(entries.length);
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, stop: 0, unchanged: 0 };
  for (const e of entries) {
    columns.add(e.action, e.verb, e.reasons, e.reasonDetails ?? NO_REASONS);
    counts[e.action === 'destroy' && e.verb === 'stop' ? 'stop' : e.action]++;
  }
  return new PlanTable(columns, (i) => entries[i]!.id, counts);
}

const ORPHAN_DETAILS: readonly ReasonDetail[] = Object.freeze([{ kind: 'orphan' }]);
const ORPHAN: readonly string[] = Object.freeze(ORPHAN_DETAILS.map((d) => reasonText(d)));
const ORPHAN_KEPT_DETAILS: readonly ReasonDetail[] = Object.freeze([{ kind: 'orphan', kept: true }]);
const ORPHAN_KEPT: readonly string[] = Object.freeze(ORPHAN_KEPT_DETAILS.map((d) => reasonText(d)));

