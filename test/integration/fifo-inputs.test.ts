// A fifo where an input's file was, or inside a tree an input reads, is seen
// for what it is (neither file nor folder) without being opened to block on
// a writer that never comes. Integration, as Node makes no fifo: mkfifo does.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { HashCache, hashTree, walkTree, type HashCacheOptions } from '../../src/hash/index.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ng-fifo-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A clock a minute ahead: every file looks old, so no entry is racy. */
const later: HashCacheOptions = { now: () => (BigInt(Date.now()) + 60_000n) * 1_000_000n };

test('a file replaced by a fifo between its stat and its read: opened without blocking, seen as other', () => {
  const file = path.join(dir, 'pipe');
  writeFileSync(file, 'x');
  let replaced = false;
  const cache = new HashCache(undefined, {
    ...later,
    // Runs right after the path's stat, before the read.
    simulateStat: (st) => {
      if (!replaced) {
        replaced = true;
        rmSync(file);
        execFileSync('mkfifo', [file]);
      }
      return st;
    },
  });
  expect(cache.hashFile(file)).toEqual({ kind: 'other' });
  expect(replaced).toBe(true);
});

test('a fifo in a tree is an entry of its own: the hash changes, and hashing again gives the same', () => {
  const root = path.join(dir, 'tree');
  mkdirSync(root);
  writeFileSync(path.join(root, 'a.txt'), 'a');
  const cache = new HashCache(undefined, later);
  const before = hashTree(root, cache);
  execFileSync('mkfifo', [path.join(root, 'fifo')]);
  const after = hashTree(root, cache);
  expect(after).not.toBe(before);
  expect(hashTree(root, cache)).toBe(after);
  expect(walkTree(root, cache).entries.map((e) => [e.path, e.type])).toEqual([
    ['a.txt', 'file'],
    ['fifo', 'other'],
  ]);
});
