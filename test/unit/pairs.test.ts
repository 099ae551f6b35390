// PairMap answers as a Map of the same entries does, whatever the list it was made from becomes.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { PairMap, smallMap } from '../../src/util/pairs.ts';

test('a PairMap answers get, has, size and every iteration as a Map of the same entries', () => {
  fc.assert(
    fc.property(fc.uniqueArray(fc.tuple(fc.string({ maxLength: 3 }), fc.integer()), { selector: ([key]) => key, maxLength: 8 }), fc.array(fc.string({ maxLength: 3 })), (entries, probes) => {
      const map = new Map(entries);
      const flat = entries.flat();
      const pairs = new PairMap<string, number>(flat);
      // observe.ts reuses one list for every task: a PairMap reads it and keeps none of it.
      flat.fill('overwritten');
      expect(pairs.size).toBe(map.size);
      expect([...pairs]).toEqual([...map]);
      expect([...pairs.keys()]).toEqual([...map.keys()]);
      expect([...pairs.values()]).toEqual([...map.values()]);
      expect([...pairs.entries()]).toEqual([...map.entries()]);
      const seen: [string, number][] = [];
      pairs.forEach((value, key, owner) => {
        expect(owner).toBe(pairs);
        seen.push([key, value]);
      });
      expect(seen).toEqual([...map]);
      expect(Object.fromEntries(pairs)).toEqual(Object.fromEntries(map));
      for (const key of [...probes, ...map.keys()]) {
        expect(pairs.get(key)).toBe(map.get(key));
        expect(pairs.has(key)).toBe(map.has(key));
      }
    }),
  );
});

test('smallMap keeps a few pairs in a PairMap and many in a Map, with the same answers', () => {
  const few = Array.from({ length: 8 }, (_, i) => [`k${i}`, i]).flat();
  const many = Array.from({ length: 9 }, (_, i) => [`k${i}`, i]).flat();
  expect(smallMap(few)).toBeInstanceOf(PairMap);
  expect(smallMap(many)).toBeInstanceOf(Map);
  expect([...smallMap<string, number>(many)]).toEqual(Array.from({ length: 9 }, (_, i) => [`k${i}`, i]));
  expect(smallMap<string, number>(few).get('k7')).toBe(7);
});
