// A Map from task id to a value, kept as one slot per task in the graph's order.
//
// A run keeps what it observed and decided of each task until the task
// settles. A Map of 50,000 entries holds a hash table of some 1.75 MiB that
// keeps its size as entries are deleted; this is an array of 8 bytes a task,
// found through the graph's own Map of ids (one lookup, as a Map's).

import type { TaskId } from '../ids.ts';
import type { TaskGraph } from './graph.ts';

export class TaskMap<V extends object> implements Map<TaskId, V> {
  readonly #graph: TaskGraph;
  /** By the task's order; undefined where the task has no value. */
  readonly #values: (V | undefined)[] = [];
  #size = 0;

  constructor(graph: TaskGraph) {
    this.#graph = graph;
    // Pushed, not `new Array(size)`: V8 makes a slow dictionary of an array made that long at once.
    for (let i = graph.size; i > 0; i--) this.#values.push(undefined);
  }

  #slot(id: TaskId): number {
    return this.#graph.get(id)?.order ?? -1;
  }

  get size(): number {
    return this.#size;
  }

  get(id: TaskId): V | undefined {
    const at = this.#slot(id);
    return at < 0 ? undefined : this.#values[at];
  }

  has(id: TaskId): boolean {
    return this.get(id) !== undefined;
  }

  set(id: TaskId, value: V): this {
    const at = this.#slot(id);
    if (at < 0) throw new Error(`${id} is not a task of this graph`);
    if (this.#values[at] === undefined) this.#size++;
    this.#values[at] = value;
    return this;
  }

  delete(id: TaskId): boolean {
    const at = this.#slot(id);
    if (at < 0 || this.#values[at] === undefined) return false;
    this.#values[at] = undefined;
    this.#size--;
    return true;
  }

  clear(): void {
    this.#values.fill(undefined);
    this.#size = 0;
  }

  /** In the graph's order (the order a run sets them in, as a Map would give them). */
  *entries(): MapIterator<[TaskId, V]> {
    const nodes = this.#graph.ordered;
    for (let order = 0; order < nodes.length; order++) {
      const value = this.#values[order];
      if (value !== undefined) yield [nodes[order]!.id, value];
    }
  }

  *keys(): MapIterator<TaskId> {
    for (const [id] of this.entries()) yield id;
  }

  *values(): MapIterator<V> {
    for (const [, value] of this.entries()) yield value;
  }

  forEach(visit: (value: V, id: TaskId, map: Map<TaskId, V>) => void, thisArg?: unknown): void {
    for (const [id, value] of this.entries()) visit.call(thisArg, value, id, this);
  }

  [Symbol.iterator](): MapIterator<[TaskId, V]> {
    return this.entries();
  }

  get [Symbol.toStringTag](): string {
    return 'TaskMap';
  }
}
