// Graph analysis: inputs that name another task's output become trigger edges.

import { expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import type { TaskGraph, TaskNode } from '../../src/graph/graph.ts';
import { taskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';

/** The ids of the tasks with an edge from `node`, in the order forEachDependent gives them. */
function dependentsOf(graph: TaskGraph, node: TaskNode): string[] {
  const found: string[] = [];
  graph.forEachDependent(node, (down) => found.push(down.id));
  return found;
}

test('a file input that is, or lies inside, another task output is a trigger edge on that task', () => {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  const ng = builder.api();
  ng.task('unpack', { outputs: ['out/rootfs'], run: ['true'] });
  ng.task('render', { outputs: ['out/config.toml'], run: ['true'] });
  ng.task('use', {
    inputs: { deep: ng.file('out/rootfs/etc/os-release'), again: ng.file('out/rootfs/usr/bin/x'), exact: ng.file('out/config.toml'), plain: ng.file('src/a.txt') },
    run: ['true'],
  });
  const graph = analyze(builder.declarations());
  if (!graph.ok) throw new Error(JSON.stringify(graph.error));
  const use = graph.value.get(taskId('use'))!;
  expect(use.needs).toEqual(['unpack', 'render']);
  expect(use.inputs['deep']).toEqual({ kind: 'task', id: 'unpack', path: '/n/out/rootfs/etc/os-release' });
  expect(use.inputs['exact']).toEqual({ kind: 'task', id: 'render', path: '/n/out/config.toml' });
  expect(use.inputs['plain']).toEqual({ kind: 'file', path: 'src/a.txt' });
  expect(graph.value.ordered.map((n) => n.id)).toEqual(['unpack', 'render', 'use']);
});

const graphOf = (declare: (ng: ReturnType<Builder['api']>) => void) => {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  declare(builder.api());
  return analyze(builder.declarations());
};

test('input paths are relative to the Nodefile folder, whatever the task cwd, and are normalised before matching', () => {
  const graph = graphOf((ng) => {
    ng.task('make', { outputs: ['build/lib.a'], run: ['true'] });
    ng.task('link', {
      cwd: 'elsewhere',
      inputs: { lib: ng.file('build/lib.a'), dotted: ng.file('src/../build/lib.a'), absolute: ng.file('/n/build/lib.a'), source: ng.file('srcs/main.c') },
      run: ['true'],
    });
  });
  if (!graph.ok) throw new Error(JSON.stringify(graph.error));
  const link = graph.value.get(taskId('link'))!;
  expect(link.cwd).toBe('/n/elsewhere');
  expect(link.needs).toEqual(['make']);
  for (const name of ['lib', 'dotted', 'absolute']) expect(link.inputs[name]).toEqual({ kind: 'task', id: 'make', path: '/n/build/lib.a' });
  expect(link.inputs['source']).toEqual({ kind: 'file', path: 'srcs/main.c' });
});

test('a duplicate id and a duplicate output each name both tasks; an edge named twice is one edge', () => {
  const dup = graphOf((ng) => {
    ng.task('a', { outputs: ['x'], run: ['true'] });
    ng.task('b', { outputs: ['x'], run: ['true'] });
    ng.task('a', { run: ['true'] });
  });
  expect(dup.ok).toBe(false);
  if (dup.ok) return;
  expect(dup.error.map((f) => f.reason).sort()).toEqual(['duplicate-output', 'duplicate-task']);
  expect(dup.error.find((f) => f.reason === 'duplicate-output')).toMatchObject({ path: '/n/x', first: 'a', second: 'b' });
  const own = graphOf((ng) => ng.task('a', { outputs: ['x', './x'], run: ['true'] }));
  expect(own.ok ? [] : own.error).toMatchObject([{ reason: 'duplicate-output', path: '/n/x', first: 'a', second: 'a' }]);
  const twice = graphOf((ng) => {
    const a = ng.task('a', { outputs: ['x'], run: ['true'] });
    ng.task('b', { inputs: { one: a, two: a.output('x'), three: ng.file('x') }, after: [a, 'a'], run: ['true'] });
  });
  if (!twice.ok) throw new Error(JSON.stringify(twice.error));
  expect(twice.value.get(taskId('b'))!.needs).toEqual(['a']);
  expect(twice.value.get(taskId('b'))!.after).toEqual([]);
  expect(dependentsOf(twice.value, twice.value.get(taskId('a'))!)).toEqual(['b']);
});

test("a task's dependents come by order, its own edges' order", () => {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  const ng = builder.api();
  const a = ng.task('a', { outputs: ['x'], run: ['true'] });
  const b = ng.task('b', { inputs: { x: a }, outputs: ['y'], run: ['true'] });
  ng.task('c', { after: [a], run: ['true'] });
  ng.task('d', { inputs: { y: b }, after: [a], run: ['true'] });
  const whole = analyze(builder.declarations());
  if (!whole.ok) throw new Error(JSON.stringify(whole.error));
  const graph = whole.value;
  const of = (g: TaskGraph, id: string): string[] => dependentsOf(g, g.get(taskId(id))!);
  expect(of(graph, 'a')).toEqual(['b', 'c', 'd']);
  expect(of(graph, 'b')).toEqual(['d']);
  expect(of(graph, 'd')).toEqual([]);
  expect(graph.ordered.map((n) => n.order)).toEqual([0, 1, 2, 3]);
});

test("a tree input that holds another task's output is refused; one inside the output it reads is an edge", () => {
  const graph = graphOf((ng) => {
    ng.task('gen', { outputs: ['src/gen.h', 'build/gen/a', 'build/gen/sub/b'], run: ['true'] });
    ng.task('self', { outputs: ['work/result'], inputs: { work: ng.tree('work') }, run: ['true'] });
    ng.task('reader', { inputs: { sources: ng.tree('src'), sibling: ng.tree('srcs'), generated: ng.tree('build/gen') }, run: ['true'] });
  });
  if (graph.ok) throw new Error('a tree holding an output was accepted');
  expect(graph.error).toEqual([
    expect.objectContaining({ task: 'self', field: 'inputs.work', message: expect.stringContaining("holds work/result, this task's own output") }),
    expect.objectContaining({ task: 'reader', field: 'inputs.sources', message: expect.stringContaining('holds src/gen.h, an output of gen') }),
    expect.objectContaining({ task: 'reader', field: 'inputs.generated', message: expect.stringContaining('holds build/gen/a, an output of gen') }),
  ]);
  const ok = graphOf((ng) => {
    ng.task('gen', { outputs: ['build/gen'], run: ['true'] });
    ng.task('reader', { inputs: { generated: ng.tree('build/gen/sub'), plain: ng.tree('src') }, run: ['true'] });
  });
  if (!ok.ok) throw new Error(JSON.stringify(ok.error));
  expect(ok.value.get(taskId('reader'))!.needs).toEqual(['gen']);
});
