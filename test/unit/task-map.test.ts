// TaskMap: a Map from task id to a value, by the task's place in the graph.

import { expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import type { TaskGraph } from '../../src/graph/graph.ts';
import { TaskMap } from '../../src/graph/task-map.ts';
import { taskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';

function chain(): TaskGraph {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  const ng = builder.api();
  // Declared out of order: c first, then what it needs.
  const a = ng.task('a', { outputs: ['out/a'], run: ['true'] });
  const b = ng.task('b', { inputs: { a }, outputs: ['out/b'], run: ['true'] });
  ng.task('c', { inputs: { b }, run: ['true'] });
  const graph = analyze(builder.declarations());
  if (!graph.ok) throw new Error(JSON.stringify(graph.error));
  return graph.value;
}

test('behaves as a Map of the tasks that have a value, in the graph order', () => {
  const map = new TaskMap<{ n: number }>(chain());
  const [a, b, c] = ['a', 'b', 'c'].map(taskId);
  expect(map.size).toBe(0);
  map.set(c!, { n: 3 }).set(a!, { n: 1 });
  expect([map.size, map.get(a!), map.get(b!), map.has(c!), map.has(b!)]).toEqual([2, { n: 1 }, undefined, true, false]);
  // In the graph's order, not the order set: a before c.
  expect([...map]).toEqual([[a, { n: 1 }], [c, { n: 3 }]]);
  expect([...map.keys()]).toEqual([a, c]);
  map.set(a!, { n: 10 });
  expect(map.size).toBe(2);
  expect([map.delete(a!), map.delete(a!), map.size, map.get(a!)]).toEqual([true, false, 1, undefined]);
  const seen: string[] = [];
  map.forEach((value, id) => seen.push(`${id}=${value.n}`));
  expect(seen).toEqual(['c=3']);
  map.clear();
  expect([map.size, [...map.values()]]).toEqual([0, []]);
});

test('an id the graph does not have: no value, and none can be set', () => {
  const map = new TaskMap<{ n: number }>(chain());
  const other = taskId('elsewhere');
  expect([map.get(other), map.has(other), map.delete(other)]).toEqual([undefined, false, false]);
  expect(() => map.set(other, { n: 0 })).toThrow('elsewhere is not a task of this graph');
});
