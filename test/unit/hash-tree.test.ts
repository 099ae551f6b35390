// Tree and glob hashes on real temp dirs.

import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { EMPTY_GLOB_HASH, HashCache, hashGlob, hashTree, hashUnlessLarge, lookThrough, Unread, walkTree, type HashCacheOptions, type Look } from '../../src/hash/index.ts';
import { NameNotUtf8, spelled } from '../../src/hash/names.ts';

let dir: string;
let root: string;
let cache: HashCache;
const later: HashCacheOptions = { now: () => (BigInt(Date.now()) + 60_000n) * 1_000_000n };
const sha = (s: string): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;

function put(rel: string, content: string, base = root): string {
  const file = path.join(base, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  chmodSync(file, 0o644);
  return file;
}

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ng-hash-tree-'));
  root = path.join(dir, 'tree');
  put('a.txt', 'a');
  put('sub/b.txt', 'b');
  put('sub/deep/c.txt', 'c');
  put('a-b.txt', 'sorts between a.txt and sub');
  mkdirSync(path.join(root, 'empty'));
  symlinkSync('a.txt', path.join(root, 'link'));
  cache = new HashCache(undefined, later);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('hashTree', () => {
  test('lists every entry depth-first in name order with its type, mode bit, hash or target', () => {
    const tree = walkTree(root, cache);
    expect(tree.root).toBe('ok');
    expect(tree.entries).toEqual([
      { path: 'a-b.txt', type: 'file', executable: false, hash: sha('sorts between a.txt and sub') },
      { path: 'a.txt', type: 'file', executable: false, hash: sha('a') },
      { path: 'empty', type: 'directory' },
      { path: 'link', type: 'symlink', target: 'a.txt' },
      { path: 'sub', type: 'directory' },
      { path: 'sub/b.txt', type: 'file', executable: false, hash: sha('b') },
      { path: 'sub/deep', type: 'directory' },
      { path: 'sub/deep/c.txt', type: 'file', executable: false, hash: sha('c') },
    ]);
    expect(hashTree(root, cache)).toBe(tree.hash);
  });

  test('is stable, depends only on the tree (not where it is), and reads nothing the second time', () => {
    const first = hashTree(root, cache);
    const reads = cache.counters.contentReads;
    expect(hashTree(root, cache)).toBe(first);
    expect(cache.counters.contentReads).toBe(reads);
    const copy = path.join(dir, 'copy');
    cpSync(root, copy, { recursive: true, verbatimSymlinks: true });
    expect(hashTree(copy, cache)).toBe(first);
  });

  const changes: [string, () => void][] = [
    ['a content change', () => writeFileSync(path.join(root, 'sub/deep/c.txt'), 'C')],
    ['a rename', () => renameSync(path.join(root, 'sub/b.txt'), path.join(root, 'sub/b2.txt'))],
    ['a move to another directory', () => renameSync(path.join(root, 'sub/b.txt'), path.join(root, 'sub/deep/b.txt'))],
    ['chmod +x', () => chmodSync(path.join(root, 'a.txt'), 0o755)],
    ['a new empty directory', () => mkdirSync(path.join(root, 'sub/new'))],
    ['removing an empty directory', () => rmSync(path.join(root, 'empty'), { recursive: true })],
    ['a new empty file', () => writeFileSync(path.join(root, 'empty/zero'), '')],
    [
      'a symlink retargeted',
      () => {
        unlinkSync(path.join(root, 'link'));
        symlinkSync('sub/b.txt', path.join(root, 'link'));
      },
    ],
    [
      'a symlink replaced by the file it pointed to',
      () => {
        unlinkSync(path.join(root, 'link'));
        writeFileSync(path.join(root, 'link'), 'a');
      },
    ],
    [
      'a file replaced by a directory of the same name',
      () => {
        rmSync(path.join(root, 'a.txt'));
        mkdirSync(path.join(root, 'a.txt'));
      },
    ],
  ];
  for (const [what, change] of changes) {
    test(`changes on ${what}`, () => {
      const before = hashTree(root, cache);
      change();
      const after = hashTree(root, cache);
      expect(after).not.toBe(before);
      expect(hashTree(root, cache)).toBe(after);
    });
  }

  test('does not follow symlinks: the target changing outside the tree does not matter', () => {
    const outside = put('outside.txt', 'one', dir);
    symlinkSync(outside, path.join(root, 'out-link'));
    symlinkSync(path.join(dir, 'nowhere'), path.join(root, 'dangling'));
    const before = hashTree(root, cache);
    writeFileSync(outside, 'two');
    expect(hashTree(root, cache)).toBe(before);
  });

  test('an empty tree, a missing root and a file root all hash differently', () => {
    const empty = path.join(dir, 'e');
    mkdirSync(empty);
    const file = put('f', 'x', dir);
    const hashes = [hashTree(empty, cache), hashTree(path.join(dir, 'missing'), cache), hashTree(file, cache)];
    expect(new Set(hashes).size).toBe(3);
    expect(walkTree(path.join(dir, 'missing'), cache).root).toBe('missing');
    expect(walkTree(file, cache).root).toBe('not-a-directory');
  });
});

describe('a large file in a tree or a glob (large.ts)', () => {
  const wholes = { tree: (look: Look) => hashTree(root, look), glob: (look: Look) => hashGlob('**/*', root, look).hash };
  for (const [name, whole] of Object.entries(wholes)) {
    test(`${name}: left unread on the main thread, then read off it to the hash a whole read gives; given up on the signal`, async () => {
      put('sub/big.img', 'x'.repeat(9 << 20));
      const expected = whole(lookThrough(new HashCache(undefined, later)));
      const first = hashUnlessLarge(cache, whole);
      expect(first).toBeInstanceOf(Unread);
      const unread = first as Unread<string>;
      await expect(unread.read(AbortSignal.abort(new Error('interrupted')))).rejects.toThrow('interrupted');
      expect(await unread.read(new AbortController().signal)).toBe(expected);
      // Read now, the cache vouches for it: one pass on the main thread.
      expect(hashUnlessLarge(cache, whole)).toBe(expected);
    });
  }
});

describe('hashGlob', () => {
  test('hashes the matched files and returns them sorted, relative to the base', () => {
    put('src/x.ts', 'x');
    put('src/lib/y.ts', 'y');
    put('src/lib/z.js', 'z');
    put('src/.hidden.ts', 'h');
    const result = hashGlob('src/**/*.ts', root, cache);
    expect(result.files).toEqual(['src/lib/y.ts', 'src/x.ts']);
    expect(result.hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hashGlob('src/**/*.ts', root, cache)).toEqual(result);
    expect(hashGlob(['src/x.ts', 'src/**/*.ts'], root, cache)).toEqual(result);
  });

  test('counts only files: matched directories add nothing', () => {
    put('src/x.ts', 'x');
    expect(hashGlob('src/**', root, cache)).toEqual(hashGlob('src/**/*', root, cache));
    expect(hashGlob('src/**', root, cache).files).toEqual(['src/x.ts']);
  });

  test('changes with a content change, a new match, a removed match, chmod +x; not with an unmatched file', () => {
    const x = put('src/x.ts', 'x');
    const base = hashGlob('src/*.ts', root, cache).hash;
    put('src/readme.md', 'not matched');
    expect(hashGlob('src/*.ts', root, cache).hash).toBe(base);

    writeFileSync(x, 'X');
    const edited = hashGlob('src/*.ts', root, cache).hash;
    expect(edited).not.toBe(base);
    put('src/w.ts', 'w');
    const added = hashGlob('src/*.ts', root, cache).hash;
    expect(added).not.toBe(edited);
    chmodSync(x, 0o755);
    const executable = hashGlob('src/*.ts', root, cache).hash;
    expect(executable).not.toBe(added);
    rmSync(path.join(root, 'src/w.ts'));
    expect(hashGlob('src/*.ts', root, cache).hash).not.toBe(executable);
  });

  test('a glob that matches nothing has the empty digest', () => {
    expect(hashGlob('nothing/**/*.none', root, cache)).toEqual({ hash: EMPTY_GLOB_HASH, files: [] });
    expect(hashGlob('*.none', path.join(dir, 'no-such-base'), cache)).toEqual({ hash: EMPTY_GLOB_HASH, files: [] });
    expect(EMPTY_GLOB_HASH).not.toBe(hashGlob('a.txt', root, cache).hash);
  });

  test('follows symlinks to files; the same files under another base hash the same', () => {
    const matched = hashGlob('*', root, cache);
    expect(matched.files).toEqual(['a-b.txt', 'a.txt', 'link']);
    const copy = path.join(dir, 'copy');
    cpSync(root, copy, { recursive: true, verbatimSymlinks: true });
    expect(hashGlob('*', copy, cache)).toEqual(matched);
  });
});

describe('names that are not UTF-8 (names.ts)', () => {
  // `caf` and the Latin-1 byte of é: Node lists it as `caf\uFFFD`, a name that opens nothing.
  const latin1 = (base: string, name = 'caf'): Buffer => Buffer.concat([Buffer.from(`${base}/${name}`), Buffer.from([0xe9])]);

  test('a tree refuses a file or a folder so named, with its bytes spelled', () => {
    writeFileSync(latin1(path.join(root, 'sub')), 'x');
    expect(() => hashTree(root, cache)).toThrow(new NameNotUtf8(`${root}/sub/caf\\xe9`));
    rmSync(latin1(path.join(root, 'sub')));
    mkdirSync(latin1(root, 'dir'));
    expect(() => walkTree(root, cache)).toThrow(new NameNotUtf8(`${root}/dir\\xe9`));
  });

  test('a glob refuses a match so named, and a match in a folder so named', () => {
    const everyText = hashGlob('**/*.txt', root, cache).files;
    writeFileSync(latin1(root), 'x');
    expect(() => hashGlob('caf*', root, cache)).toThrow(new NameNotUtf8(`${root}/caf\\xe9`));
    expect(hashGlob('*.txt', root, cache).files).toEqual(['a-b.txt', 'a.txt']);
    rmSync(latin1(root));
    mkdirSync(latin1(root));
    writeFileSync(Buffer.concat([latin1(root), Buffer.from('/inner.txt')]), '');
    expect(() => hashGlob('**', root, cache)).toThrow(NameNotUtf8);
    // What lies below it globSync cannot list: a walk that passes the folder refuses it, one that does not passes by.
    expect(() => hashGlob('**/*.txt', root, cache)).toThrow(new NameNotUtf8(`${root}/caf\\xe9`));
    expect(hashGlob('a*.txt', root, cache).files).toEqual(['a-b.txt', 'a.txt']);
    rmSync(latin1(root), { recursive: true });
    writeFileSync(latin1(root, 'odd.bin'), '');
    expect(hashGlob('**/*.txt', root, cache).files).toEqual(everyText);
  });

  test('a name that holds U+FFFD as UTF-8 is a name like any other', () => {
    const before = hashTree(root, cache);
    put('caf\uFFFD', 'x');
    expect(hashTree(root, cache)).not.toBe(before);
    expect(hashGlob('caf*', root, cache).files).toEqual(['caf\uFFFD']);
  });

  test('a link whose target is not UTF-8 counts by its bytes: two such targets differ', () => {
    const link = path.join(root, 'odd-link');
    symlinkSync(latin1('/srv'), link);
    const first = hashTree(root, cache);
    unlinkSync(link);
    symlinkSync(Buffer.concat([Buffer.from('/srv/caf'), Buffer.from([0xe8])]), link);
    expect(hashTree(root, cache)).not.toBe(first);
  });

  test('spelled writes each byte outside a UTF-8 character as \\xHH and keeps the characters', () => {
    expect(spelled(Buffer.concat([Buffer.from('né/'), Buffer.from([0xff, 0xc3]), Buffer.from('€')]))).toBe('né/\\xff\\xc3€');
  });
});
