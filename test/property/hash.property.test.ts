// Properties of the value hashes over random inputs.

import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { canonicalJson, hashParts, hashValue } from '../../src/hash/index.ts';

/** Rebuilds every object with its keys in a shuffled order. */
function shuffled(value: unknown, rand: () => number): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffled(v, rand));
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [entries[i], entries[j]] = [entries[j]!, entries[i]!];
    }
    return Object.fromEntries(entries.map(([k, v]) => [k, shuffled(v, rand)]));
  }
  return value;
}

const json = fc.jsonValue({ noUnicodeString: false });

describe('canonicalJson', () => {
  test('is independent of key order and parses back to an equal value (so equal text means equal values)', () => {
    fc.assert(
      fc.property(json, fc.integer(), (value, seed) => {
        let s = seed;
        const rand = (): number => ((s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x80000000);
        const text = canonicalJson(value);
        expect(canonicalJson(shuffled(value, rand))).toBe(text);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(hashValue(shuffled(value, rand))).toBe(hashValue(value));
      }),
      { numRuns: 300 },
    );
  });
});

describe('hashParts', () => {
  test('different lists of strings hash differently', () => {
    const parts = fc.array(fc.string({ unit: fc.constantFrom('a', 'b', ':', '\n', '1', '2'), maxLength: 4 }), { maxLength: 5 });
    fc.assert(
      fc.property(parts, parts, (a, b) => {
        const equal = a.length === b.length && a.every((p, i) => p === b[i]);
        expect(hashParts(a) === hashParts(b)).toBe(equal);
      }),
      { numRuns: 2000 },
    );
  });
});
