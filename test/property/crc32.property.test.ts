// The journal's CRC-32 (src/util/crc32.ts): the table-driven one a small state
// is checked with gives node:zlib's number for any bytes, and so does crc32()
// on either side of the point where it hands over to node:zlib; continued
// over more bytes, it is the checksum of all of them.

import fc from 'fast-check';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { describe, expect, test } from 'vitest';
import { crc32, crc32Table } from '../../src/util/crc32.ts';

describe('crc32', () => {
  test('the table gives zlib\'s checksum for any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2048 }), (bytes) => {
        expect(crc32Table(bytes)).toBe(zlibCrc32(bytes));
      }),
      { numRuns: 2000 },
    );
  });

  test('continued over a second part, it is the checksum of both parts (the seal keeps the journal\'s so)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1024 }), fc.uint8Array({ maxLength: 1024 }), (a, b) => {
        const whole = zlibCrc32(Buffer.concat([a, b]));
        expect(crc32Table(b, crc32Table(a))).toBe(whole);
        expect(zlibCrc32(b, zlibCrc32(a))).toBe(whole);
      }),
      { numRuns: 1000 },
    );
  });

  test('known values', () => {
    expect(crc32Table(new Uint8Array())).toBe(0);
    // The standard check value of CRC-32/ISO-HDLC.
    expect(crc32Table(Buffer.from('123456789'))).toBe(0xcbf43926);
  });

  test('crc32() agrees with zlib before and after it hands over to it', () => {
    // 300 KiB in pieces crosses the 64 KiB hand-over.
    const pieces = fc.sample(fc.uint8Array({ minLength: 2048, maxLength: 4096 }), { numRuns: 150, seed: 7 });
    let total = 0;
    for (const piece of pieces) {
      expect(crc32(piece)).toBe(zlibCrc32(piece));
      total += piece.length;
    }
    expect(total).toBeGreaterThan(64 * 1024);
  });
});
