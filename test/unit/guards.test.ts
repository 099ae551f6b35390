import { expect, test } from 'vitest';
import { isStrings } from '../../src/util/guards.ts';

test('isStrings: an array of strings only, an empty one included; a hole or any other element is refused', () => {
  expect(isStrings([])).toBe(true);
  expect(isStrings(['a', ''])).toBe(true);
  for (const v of [undefined, null, 'a', { 0: 'a', length: 1 }, ['a', 1], ['a', null], [['a']], [, 'a']]) expect(isStrings(v), JSON.stringify(v)).toBe(false);
});
