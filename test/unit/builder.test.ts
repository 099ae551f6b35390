// What the Builder keeps of a declaration: its own spec and inputs object, an
// input repeated from the last task shared, task handles in `after` as ids.

import { expect, test } from 'vitest';
import { Builder } from '../../src/nodefile/builder.ts';
import type { InputSpec } from '../../src/nodefile/types.ts';

const declare = (body: (ng: ReturnType<Builder['api']>) => void) => {
  const builder = new Builder('/n/Nodefile.ts', '/n', { sites: false });
  body(builder.api());
  return builder.declarations().tasks;
};

test('a file input repeated from the last task, as a loop declares it, is one object; another path is not', () => {
  const tasks = declare((ng) => {
    for (const leaf of ['a', 'b', 'c']) {
      ng.task(`cp/${leaf}`, { inputs: { leaf: ng.file(`src/${leaf}.c`), header: ng.file(`src/${'common'}.h`) }, outputs: [`obj/${leaf}.o`], run: ['cp', `src/${leaf}.c`, `obj/${leaf}.o`] });
    }
    ng.task('cp/d', { inputs: { leaf: ng.file('src/d.c'), header: ng.file('other/common.h') }, run: ['true'] });
    ng.task('cp/e', { inputs: { leaf: ng.tree('src/d.c'), header: ng.file('other/common.h') }, run: ['true'] });
  });
  const header = (i: number) => tasks[i]!.inputs['header'];
  expect(header(1)).toBe(header(0));
  expect(header(2)).toBe(header(0));
  expect(header(3)).not.toBe(header(0));
  expect(header(3)).toEqual({ kind: 'file', path: 'other/common.h' });
  expect(header(4)).toBe(header(3));
  // The same path as another kind of input is not the same input.
  expect(tasks[4]!.inputs['leaf']).toEqual({ kind: 'tree', path: 'src/d.c' });
  expect(tasks[4]!.inputs['leaf']).not.toBe(tasks[3]!.inputs['leaf']);
  expect(tasks.map((t) => t.inputs['leaf'])).toEqual(['a', 'b', 'c', 'd'].map((l) => ({ kind: 'file', path: `src/${l}.c` })).concat([{ kind: 'tree', path: 'src/d.c' }]));
  // The spec's inputs are the task's: one object.
  for (const t of tasks) expect(t.spec.inputs).toBe(t.inputs);
});

test('the declaration is a copy: the Nodefile changing its inputs object, argv or outputs afterwards changes nothing', () => {
  let inputs: Record<string, InputSpec> = {};
  const run = ['render', '--to', 'out.toml'];
  const outputs = ['out.toml'];
  const tasks = declare((ng) => {
    inputs = { config: ng.file('config.toml'), mirror: ng.value('registry.local') };
    ng.task('render', { inputs, outputs, run, env: { A: '1' } });
  });
  inputs['extra'] = { kind: 'file', path: 'later.txt' };
  delete inputs['config'];
  run[2] = 'elsewhere';
  outputs.push('more.toml');
  const [render] = tasks;
  expect(Object.keys(render!.inputs)).toEqual(['config', 'mirror']);
  expect(render!.spec).toEqual({ inputs: render!.inputs, outputs: ['out.toml'], run: ['render', '--to', 'out.toml'], env: { A: '1' } });
  expect(render!.outputs).toEqual(['out.toml']);
});

test('`after` is kept as ids, not as the handles; an input named like an Object method is an input', () => {
  const tasks = declare((ng) => {
    const first = ng.task('first', { run: ['true'] });
    ng.task('second', { inputs: { toString: ng.file('a.txt') }, after: [first, 'zero'], run: ['true'] });
    ng.task('third', { inputs: { toString: ng.file('a.txt'), constructor: ng.file('b.txt') }, run: ['true'] });
  });
  const [, second, third] = tasks;
  expect(second!.after).toEqual(['first', 'zero']);
  expect(second!.spec).not.toHaveProperty('after');
  expect(Object.hasOwn(second!.inputs, 'toString')).toBe(true);
  expect(third!.inputs['toString']).toBe(second!.inputs['toString']);
  expect(third!.inputs['constructor']).toEqual({ kind: 'file', path: 'b.txt' });
});

test('a declaration that is not plainly valid is kept as declared, for the schema to judge', () => {
  const spec = { run: ['true'], inputs: { a: { kind: 'file', path: 'a' } }, unknownField: 1 };
  const tasks = declare((ng) => {
    ng.task('odd', spec as never);
  });
  expect(tasks[0]!.spec).toBe(spec);
  expect(tasks[0]!.inputs).toBe(spec.inputs);
});
