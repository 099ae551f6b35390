// The fast path of task validation never accepts what the zod schema rejects.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { plainlyValid, taskSpecSchema } from '../../src/nodefile/schema.ts';

const anyValue = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.constant(undefined), fc.boolean(), fc.array(fc.string(), { maxLength: 3 }));
const input = fc.oneof(
  fc.record({ kind: fc.constantFrom('file', 'tree', 'task', 'glob', 'value', 'env', 'bogus'), path: anyValue, id: anyValue }, { requiredKeys: ['kind'] }),
  anyValue,
);
const spec = fc.record(
  {
    run: fc.oneof(fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }), fc.constant(() => {}), anyValue),
    outputs: fc.oneof(fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }), anyValue),
    inputs: fc.oneof(fc.dictionary(fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('a', 'src', 'x y')), input, { maxKeys: 3 }), anyValue),
    version: anyValue,
    description: anyValue,
    cwd: anyValue,
    pool: anyValue,
    unknownKey: anyValue,
  },
  { requiredKeys: [] },
);

test('plainlyValid implies the schema accepts', () => {
  fc.assert(
    fc.property(spec, (s) => {
      if (plainlyValid(s as Record<string, unknown>)) expect(taskSpecSchema.safeParse(s).success).toBe(true);
    }),
    { numRuns: 5000 },
  );
});

test('the common shapes take the fast path', () => {
  expect(plainlyValid({ run: ['cp', 'a', 'b'], outputs: ['b'], inputs: { a: { kind: 'file', path: 'a' }, t: { kind: 'task', id: 'x' } } })).toBe(true);
  expect(plainlyValid({ run: () => {}, version: '1' })).toBe(true);
  expect(plainlyValid({ run: ['cp'], outputs: 'b' })).toBe(false);
});
