// Which recorded tasks a teardown takes, and in what order. From the edges
// recorded in state, not the graph: the Nodefile may no longer have them.

import type { TaskId } from '../ids.ts';
import type { TaskRecord } from '../state/record.ts';

/** What teardown orders read of records: the state's, or a plain map of them. */
export interface RecordReader {
  get(id: TaskId): TaskRecord | undefined;
  keys(): Iterable<TaskId>;
}

/** The tasks a record says it depended on, by either kind of edge. */
export function upstreamOf(record: Pick<TaskRecord, 'edges'> | undefined): TaskId[] {
  return record === undefined ? [] : [...record.edges.needs, ...record.edges.after];
}

/** For each task of `ids`, the tasks of `ids` that depend on it (every task of `ids` has an entry). */
export function dependentsOf(ids: Iterable<TaskId>, records: RecordReader): Map<TaskId, TaskId[]> {
  const dependents = new Map<TaskId, TaskId[]>();
  for (const id of ids) dependents.set(id, []);
  for (const [id] of dependents) {
    for (const up of upstreamOf(records.get(id))) dependents.get(up)?.push(id);
  }
  return dependents;
}

/** A task before anything it needed (Kahn's algorithm from the tasks nothing depends on, stable in `ids` order). */
export function teardownOrder(ids: readonly TaskId[], records: RecordReader): TaskId[] {
  const waiting = new Map<TaskId, number>();
  for (const [id, dependents] of dependentsOf(ids, records)) waiting.set(id, dependents.length);
  const ready = ids.filter((id) => waiting.get(id) === 0);
  const order: TaskId[] = [];
  for (let next = 0; next < ready.length; next++) {
    const id = ready[next]!;
    order.push(id);
    for (const up of upstreamOf(records.get(id))) {
      const left = waiting.get(up);
      if (left === undefined) continue;
      waiting.set(up, left - 1);
      if (left === 1) ready.push(up);
    }
  }
  // A recorded cycle cannot come from a valid graph; keep the rest rather than lose it.
  if (order.length < ids.length) {
    const placed = new Set(order);
    for (const id of ids) if (!placed.has(id)) order.push(id);
  }
  return order;
}

/** `targets` and every recorded task that depends on one of them, transitively. */
function withDependents(targets: Iterable<TaskId>, dependents: ReadonlyMap<TaskId, readonly TaskId[]>): Set<TaskId> {
  const chosen = new Set<TaskId>();
  const stack = [...targets].filter((id) => dependents.has(id));
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (chosen.has(id)) continue;
    chosen.add(id);
    for (const down of dependents.get(id)!) stack.push(down);
  }
  return chosen;
}

/** Stopping a task stops what depends on it first, and nothing upstream. */
export function stopSet(targets: ReadonlySet<TaskId>, records: RecordReader): TaskId[] {
  const chosen = new Set<TaskId>(targets);
  let grew = true;
  while (grew) {
    grew = false;
    for (const id of records.keys()) {
      if (chosen.has(id) || !upstreamOf(records.get(id)).some((up) => chosen.has(up))) continue;
      chosen.add(id);
      grew = true;
    }
  }
  return teardownOrder([...chosen], records);
}

/**
 * What a destroy of `targets` takes (all records when undefined): the targets,
 * everything that depends on them, and then any upstream task nothing else needs any more.
 */
export function destroySet(targets: ReadonlySet<TaskId> | undefined, records: RecordReader): TaskId[] {
  if (targets === undefined) return teardownOrder([...records.keys()], records);
  const dependents = dependentsOf(records.keys(), records);
  const chosen = withDependents(targets, dependents);
  // Shared upstream goes once nothing outside the chosen set still depends on it.
  let grew = true;
  while (grew) {
    grew = false;
    for (const id of [...chosen]) {
      for (const up of upstreamOf(records.get(id))) {
        if (chosen.has(up) || !dependents.has(up)) continue;
        if (dependents.get(up)!.every((d) => chosen.has(d))) {
          chosen.add(up);
          grew = true;
        }
      }
    }
  }
  return teardownOrder([...chosen], records);
}
