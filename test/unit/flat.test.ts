// flat() hands back the same text, whatever the string and however it was built.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { flat } from '../../src/util/flat.ts';

test('flat returns a string equal to the one given, ropes and strings NFC would change included', () => {
  fc.assert(
    fc.property(fc.array(fc.string({ unit: 'binary' }), { maxLength: 6 }), (parts) => {
      // Joined piece by piece, as a template literal does: a rope once it is long enough.
      let built = '';
      for (const part of parts) built = `${built}/${part}`;
      expect(flat(built)).toBe(built);
    }),
  );
  // Not in NFC: normalize() would compose the accent; flat keeps the text as declared.
  const decomposed = 'cafe\u0301/' + 'x'.repeat(20);
  expect(flat(decomposed)).toBe(decomposed);
  expect(flat(decomposed).length).toBe(decomposed.length);
});
