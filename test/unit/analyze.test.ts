// Graph analysis: inputs that name another task's output become trigger edges.

import { expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import { taskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';

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
  expect(use.inputs.get('deep')).toEqual({ kind: 'task', id: 'unpack', path: '/n/out/rootfs/etc/os-release' });
  expect(use.inputs.get('exact')).toEqual({ kind: 'task', id: 'render', path: '/n/out/config.toml' });
  expect(use.inputs.get('plain')).toEqual({ kind: 'file', path: 'src/a.txt' });
  expect(graph.value.ordered.map((n) => n.id)).toEqual(['unpack', 'render', 'use']);
});
