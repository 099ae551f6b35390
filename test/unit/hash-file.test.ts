// Streamed file hashes, at the chunk boundaries, against the digest of the whole content in one piece.

import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ASYNC_CHUNK_BYTES, CHUNK_BYTES, sha256FdSync, sha256FileAsync, sha256FileSync } from '../../src/hash/index.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ng-hash-file-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const whole = (content: Buffer): string => `sha256:${createHash('sha256').update(content).digest('hex')}`;

/** Deterministic, non-repeating-looking bytes. */
function bytes(n: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

describe('sha256 of files', () => {
  const around = (chunk: number): number[] => [chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 12345];
  const sizes = [...new Set([0, 1, 4095, ...around(CHUNK_BYTES), ...around(ASYNC_CHUNK_BYTES)])].sort((a, b) => a - b);
  for (const size of sizes) {
    test(`${size} bytes: sync and async equal the whole content's digest`, async () => {
      const file = path.join(dir, `f${size}`);
      const content = bytes(size, size + 7);
      writeFileSync(file, content);
      const expected = whole(content);
      expect(sha256FileSync(file)).toEqual({ hash: expected, bytes: size });
      expect(await sha256FileAsync(file)).toEqual({ hash: expected, bytes: size });
    });
  }

  test('sha256FdSync hashes from the current position', () => {
    const file = path.join(dir, 'offset');
    writeFileSync(file, 'skip:hash me');
    const fd = openSync(file, 'r');
    try {
      readSync(fd, Buffer.alloc(5), 0, 5, null);
      expect(sha256FdSync(fd).hash).toBe(sha256FileSync(writeAndName('rest', 'hash me')).hash);
    } finally {
      closeSync(fd);
    }
  });

  test('sha256FdSync with a size stops there (the caller checks the size after)', () => {
    const file = writeAndName('sized', 'exactly this and more');
    for (const size of [0, 7, 12]) {
      const fd = openSync(file, 'r');
      try {
        expect(sha256FdSync(fd, size)).toEqual({ hash: sha256FileSync(writeAndName(`p${size}`, 'exactly this and more'.slice(0, size))).hash, bytes: size });
      } finally {
        closeSync(fd);
      }
    }
    const big = path.join(dir, 'sized-big');
    writeFileSync(big, bytes(2 * CHUNK_BYTES + 12345, 3));
    const fd = openSync(big, 'r');
    try {
      expect(sha256FdSync(fd, 2 * CHUNK_BYTES + 12345)).toEqual(sha256FileSync(big));
    } finally {
      closeSync(fd);
    }
  });

  test('a missing file throws the fs error', async () => {
    expect(() => sha256FileSync(path.join(dir, 'nope'))).toThrow(/ENOENT/);
    await expect(sha256FileAsync(path.join(dir, 'nope'))).rejects.toThrow(/ENOENT/);
  });
});

function writeAndName(name: string, content: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
}
