// The fast path of task validation never accepts what the zod schema rejects.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { ID_PATTERN, plainlyValid, SPEC_KEYS } from '../../src/nodefile/plain.ts';
import { taskIdSchema, taskSpecSchema, validateTaskSpec } from '../../src/nodefile/schema.ts';

const anyValue = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.constant(undefined), fc.boolean(), fc.array(fc.string(), { maxLength: 3 }));
// Values as a Nodefile might pass them: JSON, and what only looks like it.
const oddValue = fc.oneof(
  fc.constantFrom(Infinity, NaN, -0, undefined, 1n, new Date(0), new Map(), [1, , 3], () => 1),
  fc.constant(Object.assign(Object.create(null) as object, { a: 1 })),
  fc.constant({ [Symbol('s')]: 1 }),
  fc.constant(Object.defineProperty({}, 'hidden', { value: 1, enumerable: false })),
  fc.constant(new (class Point { x = 1 })()),
);
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  oddValue,
  fc.array(fc.oneof(fc.jsonValue({ maxDepth: 1 }), oddValue), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.oneof(fc.jsonValue({ maxDepth: 1 }), oddValue), { maxKeys: 3 }),
);
const input = fc.oneof(
  fc.record(
    {
      kind: fc.constantFrom('file', 'tree', 'task', 'glob', 'value', 'env', 'bogus'),
      path: anyValue,
      id: anyValue,
      value,
      name: fc.oneof(fc.constantFrom('HOME', '_X1', '1X', 'A B', ''), anyValue),
      pattern: anyValue,
    },
    { requiredKeys: ['kind'] },
  ),
  anyValue,
);
const spec = fc.record(
  {
    run: fc.oneof(fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }), fc.constant(() => {}), fc.record({ shell: anyValue }), anyValue),
    outputs: fc.oneof(fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }), anyValue),
    inputs: fc.oneof(fc.dictionary(fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('a', 'src', 'x y')), input, { maxKeys: 3 }), anyValue),
    version: anyValue,
    description: anyValue,
    cwd: anyValue,
    pool: anyValue,
    unknownKey: anyValue,
    after: fc.oneof(fc.array(fc.oneof(fc.string({ maxLength: 3 }), fc.record({ kind: fc.constantFrom('task', 'x'), id: anyValue })), { maxLength: 2 }), anyValue),
    check: fc.oneof(fc.constant(() => true), fc.array(fc.string(), { maxLength: 2 }), fc.record({ shell: anyValue }), anyValue),
    stop: fc.oneof(fc.array(fc.string(), { maxLength: 2 }), fc.array(fc.array(fc.string(), { maxLength: 2 }), { maxLength: 2 }), fc.record({ shell: anyValue, extra: anyValue }, { requiredKeys: ['shell'] }), anyValue),
    destroy: fc.oneof(fc.array(fc.oneof(fc.array(fc.string(), { maxLength: 2 }), fc.record({ shell: anyValue })), { maxLength: 2 }), anyValue),
    env: fc.oneof(fc.dictionary(fc.string({ maxLength: 3 }), anyValue, { maxKeys: 2 }), anyValue),
    removeOutputs: anyValue,
    timeout: fc.oneof(fc.constantFrom('30s', '0s', '0.5ms', '1.5m', ' 2s', '2 s', '10'), anyValue),
    verbs: fc.oneof(
      fc.record({ create: anyValue, update: anyValue, upstream: fc.oneof(fc.dictionary(fc.string({ maxLength: 3 }), anyValue, { maxKeys: 2 }), anyValue), other: anyValue }, { requiredKeys: [] }),
      anyValue,
    ),
  },
  { requiredKeys: [] },
);

test('plainlyValid implies the schema accepts', () => {
  fc.assert(
    fc.property(spec, (s) => {
      if (plainlyValid(s as Record<string, unknown>)) expect(taskSpecSchema.safeParse(s).success).toBe(true);
    }),
    { numRuns: 20000 },
  );
});

test('plainlyValid implies the schema accepts: one input, the rest of the spec valid', () => {
  // Random whole specs are rarely valid elsewhere, so each kind of input is also tried alone.
  fc.assert(
    fc.property(input, (one) => {
      const s = { run: ['true'], inputs: { one } };
      if (plainlyValid(s)) expect(taskSpecSchema.safeParse(s).success).toBe(true);
    }),
    { numRuns: 20000 },
  );
});

test('the common shapes take the fast path', () => {
  expect(plainlyValid({ run: ['cp', 'a', 'b'], outputs: ['b'], inputs: { a: { kind: 'file', path: 'a' }, t: { kind: 'task', id: 'x' } } })).toBe(true);
  expect(plainlyValid({ run: () => {}, version: '1' })).toBe(true);
  expect(plainlyValid({ run: ['cp'], outputs: 'b' })).toBe(false);
  // Values, environment variables and globs: a node graph renders its configuration from values.
  const inputs = {
    settings: { kind: 'value', value: { mirrors: { 'docker.io': ['https://m.example'] }, maxPods: 110, dns: null } },
    home: { kind: 'env', name: 'HOME' },
    sources: { kind: 'glob', pattern: 'src/**/*.ts' },
  };
  expect(plainlyValid({ run: ['render'], inputs })).toBe(true);
  expect(taskSpecSchema.safeParse({ run: ['render'], inputs }).success).toBe(true);
  expect(plainlyValid({ run: ['render'], inputs: { v: { kind: 'value', value: new Date(0) } } })).toBe(false);
  expect(plainlyValid({ run: ['render'], inputs: { e: { kind: 'env', name: '1X' } } })).toBe(false);
  const rich = {
    run: { shell: 'make' },
    after: ['a', { kind: 'task', id: 'b' }],
    check: ['true'],
    stop: [['a'], { shell: 'b' }],
    destroy: ['rm', 'x'],
    env: { A: '1' },
    removeOutputs: false,
    verbs: { create: 'start', update: 'restart', upstream: { a: 'start' } },
  };
  expect(plainlyValid(rich)).toBe(true);
  expect(taskSpecSchema.safeParse(rich).success).toBe(true);
});

test('the plain check knows exactly the fields of the schema', () => {
  expect([...SPEC_KEYS].sort()).toEqual(Object.keys(taskSpecSchema.shape).sort());
});

test('a task id is not a path: no segment is "." or "..", none is empty, in the builder\'s check and the schema alike', () => {
  const refused = ['.', '..', 'a/..', '../a', 'a/../b', 'a/./b', './a', 'a//b', '/a', 'a/', ''];
  const accepted = ['a', 'kube1/containerd.config', '...', '.hidden', 'a/.b', 'a/b..', 'x:y@z+1-2_3'];
  for (const id of refused) {
    expect(ID_PATTERN.test(id), id).toBe(false);
    expect(taskIdSchema.safeParse(id).success, id).toBe(false);
  }
  for (const id of accepted) {
    expect(ID_PATTERN.test(id), id).toBe(true);
    expect(taskIdSchema.safeParse(id).success, id).toBe(true);
  }
});

test('stop and destroy refuse an empty list as check and run refuse an empty argv: [] would be run as a command with no program', () => {
  for (const field of ['stop', 'destroy', 'check', 'run']) {
    const spec = { run: ['true'], [field]: [] };
    expect(plainlyValid(spec), field).toBe(false);
    expect(taskSpecSchema.safeParse(spec).success, field).toBe(false);
  }
  expect(taskSpecSchema.safeParse({ run: ['true'], stop: [['a']], destroy: ['b'] }).success).toBe(true);
});

test('a removeOutputs that is none of its three says which they are', () => {
  const refused = validateTaskSpec({ run: ['true'], removeOutputs: 'yes' });
  expect(refused).toEqual({ ok: false, error: [{ field: 'removeOutputs', message: `true, false or 'dropped', not "yes"` }] });
});

test('an empty id in after says so in words, not in zod\'s', () => {
  expect(validateTaskSpec({ run: ['true'], after: [''] })).toEqual({ ok: false, error: [{ field: 'after.0', message: 'an empty string names no task: give a task id, or the task ng.task returned' }] });
});
