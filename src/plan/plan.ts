// The planner: graph + observations + state in, a plan with a reason per
// task out. Pure and synchronous; observe.ts does the reading.

import type { ContentHash, IdList, TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { TaskMap } from '../graph/task-map.ts';
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
  /** How many entries: every selected task in topological order, then orphans to destroy. */
  readonly size: number;
  readonly counts: PlanCounts;
  /**
   * The entries, each made as it is reached. A plan keeps them in columns, not
   * as an object each: at 50,000 tasks those objects were 3 MiB that a build
   * and a no-op kept to their end (BENCHMARKS.md, fifteenth sitting).
   */
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
const UNCHANGED = ACTIONS.indexOf('unchanged');
const NO_REASONS: readonly string[] = Object.freeze([]);

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

  constructor(columns: Columns, idAt: (index: number) => TaskId, counts: PlanCounts) {
    this.size = columns.size;
    this.#idAt = idAt;
    this.#actions = columns.actions;
    this.#verbs = columns.verbs;
    this.#reasons = columns.reasons;
    this.counts = counts;
  }

  entryAt(index: number): PlanEntry {
    const action = ACTIONS[this.#actions[index]!]!;
    return { id: this.#idAt(index), action, verb: this.#verbs.get(index) ?? verbFor(undefined, action), reasons: this.#reasons?.[index] ?? NO_REASONS };
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
  readonly settled: ReadonlyMap<TaskId, UpstreamState>;
  readonly undecided: Plan;
  constructor(columns: Columns, idAt: (index: number) => TaskId, counts: PlanCounts, decisions: Map<TaskId, Decision>, settled: ReadonlyMap<TaskId, UpstreamState>) {
    super(columns, idAt, counts);
    this.decisions = decisions;
    this.settled = settled;
    this.undecided = new PlanTable(columns, idAt, counts);
  }
}

interface Columns {
  readonly size: number;
  readonly actions: Uint8Array;
  readonly verbs: ReadonlyMap<number, string>;
  readonly reasons: readonly (readonly string[])[] | undefined;
}

/** Collects a plan's entries in order, as the columns of a PlanTable. */
class PlanColumns implements Columns {
  size = 0;
  actions: Uint8Array;
  readonly verbs = new Map<number, string>();
  reasons: (readonly string[])[] | undefined;

  constructor(expected: number) {
    this.actions = new Uint8Array(expected);
  }

  add(action: PlanAction, verb: string, reasons: readonly string[]): void {
    const at = this.size++;
    if (at === this.actions.length) {
      const grown = new Uint8Array(Math.max(16, at * 2));
      grown.set(this.actions);
      this.actions = grown;
    }
    this.actions[at] = ACTIONS.indexOf(action);
    if (verb !== verbFor(undefined, action)) this.verbs.set(at, verb);
    if (reasons.length > 0 && this.reasons === undefined) this.reasons = new Array<readonly string[]>(at).fill(NO_REASONS);
    this.reasons?.push(reasons);
  }
}

export interface DecidedPlan extends Plan {
  /** The executor drops each task's decision once the task is settled (execute/executor.ts). */
  readonly decisions: Map<TaskId, Decision>;
  /** What a dependent learns of each task settled unchanged: its recorded output hash, without decoding its record. */
  readonly settled: ReadonlyMap<TaskId, UpstreamState>;
  /** The same plan without the decisions: what events and summaries carry (its columns are shared). */
  readonly undecided: Plan;
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

/** The tasks to plan, in order: the graph's own list when there are no targets (a plan keeps it for its ids). */
export function selectTasks(graph: TaskGraph, targets: ReadonlySet<TaskId> | undefined): readonly TaskNode[] {
  if (targets === undefined || targets.size === 0) return graph.ordered;
  const closure = graph.closure([...targets]);
  return graph.ordered.filter((n) => closure.has(n.id));
}

export function makePlan(
  graph: TaskGraph,
  observations: ReadonlyMap<TaskId, TaskObservation>,
  records: ReadonlyMap<TaskId, TaskRecord>,
  options: PlanOptions = {},
): DecidedPlan {
  const nodes = options.only?.nodes ?? selectTasks(graph, options.targets);
  const columns = new PlanColumns(nodes.length);
  const orphans: TaskId[] = [];
  const decisions = new TaskMap<Decision>(graph);
  // What a dependent learns of each task settled unchanged: made once per task, not per edge.
  const settled = new Map<TaskId, UpstreamState>(options.only?.settled ?? []);
  const upstreamOf = (id: TaskId): UpstreamState => settled.get(id) ?? PENDING;
  let recorded = 0;
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, unchanged: 0 };

  const texts = records instanceof RecordMap ? records : undefined;
  const upstreamHashes: ContentHash[] = [];

  for (const node of nodes) {
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
    columns.add(decision.action, verbFor(node, decision.action, decision.onlyBecauseOf, decision.stopped), decision.reasons);
  }

  // Every record belongs to a declared task when as many were met above as there are: no orphans to look for.
  if ((options.targets === undefined || options.targets.size === 0) && options.only === undefined && recorded < records.size) {
    for (const id of orphansOf(graph, records)) {
      counts.destroy++;
      orphans.push(id);
      columns.add('destroy', 'destroy', ORPHAN);
    }
  }
  return new DecidedPlanTable(columns, (i) => (i < nodes.length ? nodes[i]!.id : orphans[i - nodes.length]!), counts, decisions, settled);
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

/** A plan of these entries, counted (a plan read back as data, or made in a test). */
export function listedPlan(entries: readonly PlanEntry[]): Plan {
  const columns = new PlanColumns(entries.length);
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, unchanged: 0 };
  for (const e of entries) {
    columns.add(e.action, e.verb, e.reasons);
    counts[e.action]++;
  }
  return new PlanTable(columns, (i) => entries[i]!.id, counts);
}

const ORPHAN: readonly string[] = Object.freeze(['orphan: no longer in the Nodefile']);

/** The plan of a whole graph found unchanged, as makePlan makes it (for a run the state's seal vouched for). */
export function unchangedPlan(ids: IdList): Plan {
  const actions = new Uint8Array(ids.length).fill(UNCHANGED);
  const counts = { create: 0, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, unchanged: ids.length };
  return new PlanTable({ size: ids.length, actions, verbs: new Map(), reasons: undefined }, (i) => ids.at(i)!, counts);
}

/**
 * The whole graph's plan from one of some of its tasks (a run planned from the
 * seal, state/delta.ts): every other task is unchanged, in the order of `ids`.
 */
export function wholePlan(ids: readonly TaskId[], part: Plan): Plan {
  const planned = new Map<TaskId, PlanEntry>();
  for (const e of part) planned.set(e.id, e);
  const columns = new PlanColumns(ids.length);
  for (const id of ids) {
    const e = planned.get(id);
    if (e === undefined) columns.add('unchanged', 'unchanged', NO_REASONS);
    else columns.add(e.action, e.verb, e.reasons);
  }
  return new PlanTable(columns, (i) => ids[i]!, { ...part.counts, unchanged: part.counts.unchanged + ids.length - part.size });
}
