// The SHA-256 a small run hashes with (src/hash/sha256.ts): the JavaScript one
// gives node:crypto's digest for any string (as UTF-8, lone surrogates
// included) and any bytes, at every length around the block boundaries, and
// sha256Hex() agrees on either side of its hand-over to node:crypto.

import fc from 'fast-check';
import { hash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { sha256Hex, sha256HexJs } from '../../src/hash/sha256.ts';

const native = (data: string | Uint8Array): string => hash('sha256', data, 'hex');

describe('sha256', () => {
  test('known values', () => {
    expect(sha256HexJs('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256HexJs('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  test('every length from 0 to 300 bytes (one and two final blocks, several blocks)', () => {
    for (let n = 0; n <= 300; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 31 + n) & 0xff);
      expect(sha256HexJs(bytes)).toBe(native(bytes));
      const text = 'é'.repeat(n >> 1) + 'x'.repeat(n & 1);
      expect(sha256HexJs(text)).toBe(native(text));
    }
  });

  test('any bytes and any string give node:crypto\'s digest', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), (bytes) => {
        expect(sha256HexJs(bytes)).toBe(native(bytes));
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 1000 }), (text) => {
        expect(sha256HexJs(text)).toBe(native(text));
      }),
      { numRuns: 500 },
    );
  });

  test('sha256Hex() agrees with node:crypto before and after it hands over to it', () => {
    // 64 KiB in pieces crosses the 16 KiB hand-over.
    let total = 0;
    for (let i = 0; total < 64 * 1024; i++) {
      const piece = i % 2 === 0 ? Uint8Array.from({ length: 1500 + i }, (_, j) => (j ^ i) & 0xff) : `piece ${i} `.repeat(100);
      expect(sha256Hex(piece)).toBe(native(piece));
      total += typeof piece === 'string' ? piece.length : piece.length;
    }
  });
});
