// The stat-keyed hash cache on real temp dirs: hits read nothing, every kind of
// change is caught (content, touch, same-size rewrite with mtime restored, an
// inode renamed over), racy entries are not trusted, and the saved cache
// round-trips, is written only when it changed, and is ignored when damaged.

import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  utimesSync,
  writeFileSync,
  type BigIntStats,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { HashCache, type FileObservation, type HashCacheOptions } from '../../src/hash/index.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ng-hash-cache-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const sha = (s: string | Buffer): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;
const NS = 1_000_000_000n;

/** A clock a minute ahead: every file looks old, so no entry is racy. */
const later: HashCacheOptions = { now: () => (BigInt(Date.now()) + 60_000n) * 1_000_000n };

function write(name: string, content: string | Buffer): string {
  const file = path.join(dir, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  return file;
}

const hashOf = (o: FileObservation): string => (o.kind === 'file' ? o.hash : `<${o.kind}>`);

/** A copy of real stats with some fields replaced, keeping isFile() and friends. */
function altered(st: BigIntStats, fields: Partial<Record<'mtimeNs' | 'ctimeNs' | 'ino' | 'dev', bigint>>): BigIntStats {
  return Object.assign(Object.create(Object.getPrototypeOf(st) as object) as BigIntStats, st, fields);
}

/**
 * A simulated whole-second filesystem that keeps no separate ctime (ctime reads as
 * the mtime): the worst case for racy detection, since a same-size rewrite with the
 * mtime put back leaves every stat field as it was.
 */
const coarseNoCtime = (st: BigIntStats): BigIntStats => {
  const mtime = (st.mtimeNs / NS) * NS;
  return altered(st, { mtimeNs: mtime, ctimeNs: mtime });
};

describe('hashFile', () => {
  test('hashes content; an unchanged file is answered with one stat and no read', () => {
    const file = write('a.txt', 'hello');
    const { cache } = HashCache.load(path.join(dir, 'cache'), later);
    const first = cache.hashFile(file);
    expect(first).toEqual({ kind: 'file', hash: sha('hello'), size: 5, mode: statSync(file).mode & 0o7777 });
    expect(cache.counters).toMatchObject({ contentReads: 1, bytesRead: 5 });
    const stats = cache.counters.stats;
    expect(cache.hashFile(file)).toEqual(first);
    expect(cache.counters).toMatchObject({ stats: stats + 1, contentReads: 1, bytesRead: 5, hits: 1 });
  });

  test('a content change changes the hash', () => {
    const file = write('a.txt', 'one');
    const cache = new HashCache(undefined, later);
    expect(hashOf(cache.hashFile(file))).toBe(sha('one'));
    writeFileSync(file, 'three');
    expect(hashOf(cache.hashFile(file))).toBe(sha('three'));
    expect(cache.counters.contentReads).toBe(2);
  });

  test('a same-size rewrite with the mtime put back is caught (ctime moved)', () => {
    const file = write('a.txt', 'AAAA');
    utimesSync(file, 1_000_000, 1_000_000);
    const cache = new HashCache(undefined, later);
    expect(hashOf(cache.hashFile(file))).toBe(sha('AAAA'));
    writeFileSync(file, 'BBBB');
    utimesSync(file, 1_000_000, 1_000_000);
    expect(hashOf(cache.hashFile(file))).toBe(sha('BBBB'));
  });

  test('a touch without a content change reads again and gives the same hash', () => {
    const file = write('a.txt', 'same');
    const cache = new HashCache(undefined, later);
    const before = cache.hashFile(file);
    utimesSync(file, new Date(), new Date(Date.now() - 3_600_000));
    expect(cache.hashFile(file)).toEqual(before);
    expect(cache.counters.contentReads).toBe(2);
    expect(cache.hashFile(file)).toEqual(before);
    expect(cache.counters.contentReads).toBe(2);
  });

  test('a file renamed over it is caught by its inode, even with size, mtime and ctime equal', () => {
    // ctime pinned, so only the inode can tell the two files apart.
    const simulateStat = (st: BigIntStats): BigIntStats => altered(st, { ctimeNs: 5n * NS });
    const file = write('a.txt', 'first');
    const other = write('b.txt', 'other');
    utimesSync(file, 2_000_000, 2_000_000);
    utimesSync(other, 2_000_000, 2_000_000);
    const cache = new HashCache(undefined, { ...later, simulateStat });
    expect(hashOf(cache.hashFile(file))).toBe(sha('first'));
    renameSync(other, file);
    expect(hashOf(cache.hashFile(file))).toBe(sha('other'));
  });

  test('missing, directory, other; a vanished file leaves the cache', async () => {
    const cache = new HashCache(path.join(dir, 'cache'), later);
    expect(cache.hashFile(path.join(dir, 'nope'))).toEqual({ kind: 'missing' });
    expect(cache.hashFile(path.join(dir, 'nope', 'deeper'))).toEqual({ kind: 'missing' });
    mkdirSync(path.join(dir, 'sub'));
    expect(cache.hashFile(path.join(dir, 'sub')).kind).toBe('directory');
    // A socket: neither file nor folder (a fifo, which must not block, is test/integration/fifo-inputs.test.ts's).
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(dir, 'socket'), resolve));
    try {
      expect(cache.hashFile(path.join(dir, 'socket'))).toEqual({ kind: 'other' });
    } finally {
      server.close();
    }
    const file = write('gone.txt', 'x');
    cache.hashFile(file);
    expect(cache.size).toBe(1);
    expect(cache.save()).toBe(true);
    rmSync(file);
    expect(cache.hashFile(file)).toEqual({ kind: 'missing' });
    expect(cache.size).toBe(0);
    expect(cache.dirty).toBe(true);
  });

  test('follows symlinks; relative paths are resolved', () => {
    const file = write('target.txt', 'via link');
    const cache = new HashCache(undefined, later);
    symlinkSync('target.txt', path.join(dir, 'link'));
    expect(hashOf(cache.hashFile(path.join(dir, 'link')))).toBe(sha('via link'));
    expect(hashOf(cache.hashFile(path.relative(process.cwd(), file)))).toBe(sha('via link'));
    expect(cache.counters.contentReads).toBe(2); // the link and the file are two keys
  });

  test('mode is reported and a chmod is seen (ctime moves)', () => {
    const file = write('tool', '#!/bin/sh\n');
    const cache = new HashCache(undefined, later);
    chmodSync(file, 0o644);
    expect(cache.hashFile(file)).toMatchObject({ kind: 'file', mode: 0o644 });
    chmodSync(file, 0o755);
    expect(cache.hashFile(file)).toMatchObject({ kind: 'file', mode: 0o755 });
  });

  test('hashFileAsync agrees with hashFile and shares the cache, large files included', async () => {
    const big = write('big.bin', Buffer.alloc(9 * 1024 * 1024 + 3, 7));
    const small = write('small.txt', 'small');
    const cache = new HashCache(undefined, later);
    expect(await cache.hashFileAsync(big)).toMatchObject({ kind: 'file', hash: sha(readFileSync(big)), size: 9 * 1024 * 1024 + 3 });
    expect(await cache.hashFileAsync(small)).toMatchObject({ kind: 'file', hash: sha('small') });
    expect(cache.counters.contentReads).toBe(2);
    expect(cache.hashFile(big)).toMatchObject({ hash: sha(readFileSync(big)) });
    expect(await cache.hashFileAsync(small)).toMatchObject({ hash: sha('small') });
    expect(cache.counters.contentReads).toBe(2);
    expect(await cache.hashFileAsync(path.join(dir, 'nope'))).toEqual({ kind: 'missing' });
  });
});

describe('racy entries', () => {
  test('a file just written is not trusted: it is read again until it is old enough', () => {
    const file = write('fresh.txt', 'fresh');
    let offset = 0n; // how far the test clock runs ahead of the real one
    const cache = new HashCache(undefined, { now: () => BigInt(Date.now()) * 1_000_000n + offset });
    cache.hashFile(file);
    cache.hashFile(file);
    expect(cache.counters.contentReads).toBe(2); // racy: read again
    offset = 10n * NS;
    cache.hashFile(file); // read once more, now old enough: the entry becomes clean
    cache.hashFile(file);
    cache.hashFile(file);
    expect(cache.counters.contentReads).toBe(3);
  });

  test('a same-size rewrite in the same tick, with every stat field unchanged, is caught', () => {
    // The deliberate racy case: on a whole-second filesystem without ctime, write,
    // hash, rewrite the same size and put the mtime back with utimes: stat cannot
    // tell. The entry was racy (its mtime is not older than the read less the
    // margin), so it is read again.
    const file = write('racy.txt', 'AAAA');
    const second = Math.floor(Date.now() / 1000);
    utimesSync(file, second, second);
    const cache = new HashCache(undefined, { simulateStat: coarseNoCtime });
    expect(hashOf(cache.hashFile(file))).toBe(sha('AAAA'));
    const before = coarseNoCtime(statSync(file, { bigint: true }));
    writeFileSync(file, 'BBBB');
    utimesSync(file, second, second);
    const after = coarseNoCtime(statSync(file, { bigint: true }));
    expect([after.dev, after.ino, after.size, after.mtimeNs, after.ctimeNs]).toEqual([
      before.dev,
      before.ino,
      before.size,
      before.mtimeNs,
      before.ctimeNs,
    ]);
    expect(hashOf(cache.hashFile(file))).toBe(sha('BBBB'));
  });

  test('the same rewrite of a file last changed long ago is trusted: the racy rule is what protects', () => {
    // Control for the test above: identical stat, but the entry was clean, so the
    // cache answers without reading — the one-stat no-op that makes it fast.
    const file = write('old.txt', 'AAAA');
    const second = Math.floor(Date.now() / 1000) - 3600;
    utimesSync(file, second, second);
    const cache = new HashCache(undefined, { simulateStat: coarseNoCtime });
    expect(hashOf(cache.hashFile(file))).toBe(sha('AAAA'));
    writeFileSync(file, 'BBBB');
    utimesSync(file, second, second);
    expect(hashOf(cache.hashFile(file))).toBe(sha('AAAA'));
    expect(cache.counters.contentReads).toBe(1);
  });

  test('the boundary: clean only when max(mtime, ctime) < start − margin', () => {
    const file = write('edge.txt', 'edge');
    const st = statSync(file, { bigint: true });
    const changed = st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs;
    const margin = 5n * NS;
    const reads = (now: bigint): number => {
      const cache = new HashCache(undefined, { racyMarginNs: margin, now: () => now });
      cache.hashFile(file);
      cache.hashFile(file);
      return cache.counters.contentReads;
    };
    expect(reads(changed + margin)).toBe(2); // not strictly older: racy
    expect(reads(changed + margin + 1n)).toBe(1); // strictly older: clean
  });

  test('default margins: 3 s on whole-second timestamps, 100 ms otherwise', () => {
    const file = write('m.txt', 'm');
    const base = statSync(file, { bigint: true });
    const at = (changed: bigint, now: bigint): number => {
      const simulateStat = (): BigIntStats => altered(base, { mtimeNs: changed, ctimeNs: changed });
      const cache = new HashCache(undefined, { simulateStat, now: () => now });
      cache.hashFile(file);
      cache.hashFile(file);
      return cache.counters.contentReads;
    };
    const whole = 1_700_000_000n * NS;
    expect(at(whole, whole + 3n * NS)).toBe(2);
    expect(at(whole, whole + 3n * NS + 1n)).toBe(1);
    const fine = whole + 123_456_789n;
    expect(at(fine, fine + 100_000_000n)).toBe(2);
    expect(at(fine, fine + 100_000_001n)).toBe(1);
  });

  test('a racy entry alone is not worth a save; saved beside a settled one it stays racy', () => {
    const old = write('old.txt', 'old');
    const fresh = write('fresh.txt', 'fresh');
    const oldIno = statSync(old, { bigint: true }).ino;
    const freshStat = statSync(fresh, { bigint: true });
    // The clock stands at fresh.txt's change, so it stays racy; old.txt reads as changed a second before, settled.
    const at = freshStat.mtimeNs > freshStat.ctimeNs ? freshStat.mtimeNs : freshStat.ctimeNs;
    const simulateStat = (st: BigIntStats): BigIntStats => (st.ino === oldIno ? altered(st, { mtimeNs: st.mtimeNs - NS, ctimeNs: st.ctimeNs - NS }) : st);
    const clock: HashCacheOptions = { now: () => at, simulateStat };
    const cacheFile = path.join(dir, 'cache');
    const first = HashCache.load(cacheFile, clock).cache;
    first.hashFile(fresh);
    expect(first.save()).toBe(false); // it would be read again next time either way
    first.hashFile(old);
    expect(first.save()).toBe(true);
    const second = HashCache.load(cacheFile, clock).cache;
    second.hashFile(old);
    expect(second.counters.contentReads).toBe(0);
    second.hashFile(fresh);
    expect(second.counters.contentReads).toBe(1); // saved racy: not trusted after loading
    expect(second.save()).toBe(false); // same stat, same hash, still racy: nothing changed
  });
  test('a file that changes while it is read is read again, and recorded racy if it never settles', () => {
    const file = write('busy.txt', 'busy');
    // Every stat (path or fstat) sees a newer ctime, as if a writer never stopped.
    let tick = 0n;
    const simulateStat = (st: BigIntStats): BigIntStats => altered(st, { ctimeNs: st.ctimeNs - 3600n * NS + ++tick });
    const cache = new HashCache(undefined, { ...later, simulateStat });
    expect(hashOf(cache.hashFile(file))).toBe(sha('busy'));
    expect(cache.counters.contentReads).toBe(3);
    expect(cache.hashFile(file)).toMatchObject({ kind: 'file', hash: sha('busy') });
    expect(cache.counters.contentReads).toBe(6); // racy: never trusted

    // One change during the first read only: the second read settles, and is trusted.
    let calls = 0;
    const once = new HashCache(undefined, {
      ...later,
      simulateStat: (st) => (++calls === 2 ? altered(st, { ctimeNs: st.ctimeNs + 1n }) : st),
    });
    once.hashFile(file);
    expect(once.counters.contentReads).toBe(2);
    once.hashFile(file);
    expect(once.counters.contentReads).toBe(2);
  });
});

describe('a file changed between its stat and its read', () => {
  // The side effect in simulateStat runs right after the path's stat, before the read.
  const between = (file: string, change: () => void): HashCacheOptions => {
    let done = false;
    return {
      ...later,
      simulateStat: (st) => {
        if (!done) {
          done = true;
          change();
        }
        return st;
      },
    };
  };

  test('grown: the read stops at the stat size, the fstat sees more, it is read again', () => {
    const file = write('grow.txt', 'start');
    const cache = new HashCache(undefined, between(file, () => appendFileSync(file, '+more')));
    expect(cache.hashFile(file)).toMatchObject({ kind: 'file', hash: sha('start+more'), size: 10 });
    expect(cache.counters.contentReads).toBe(2);
  });

  test('shrunk', () => {
    const file = write('shrink.txt', 'a longer start');
    const cache = new HashCache(undefined, between(file, () => truncateSync(file, 3)));
    expect(cache.hashFile(file)).toMatchObject({ kind: 'file', hash: sha('a l'), size: 3 });
  });

  test('replaced by a directory, or removed', () => {
    const file = write('swap', 'x');
    const cache = new HashCache(undefined, between(file, () => {
      rmSync(file);
      mkdirSync(file);
    }));
    expect(cache.hashFile(file).kind).toBe('directory');
    const gone = write('gone', 'x');
    expect(new HashCache(undefined, between(gone, () => rmSync(gone))).hashFile(gone)).toEqual({ kind: 'missing' });
  });
});

describe('persistence', () => {
  test('round-trips: after loading, unchanged files cost one stat each and no read; a no-op saves nothing', () => {
    const files = Array.from({ length: 50 }, (_, i) => write(`d${i % 5}/f${i}.txt`, `content ${i}`));
    const cacheFile = path.join(dir, '.nodegraph', 'hashcache');
    const first = HashCache.load(cacheFile, later);
    expect(first.warning).toBeUndefined();
    const hashes = files.map((f) => hashOf(first.cache.hashFile(f)));
    expect(first.cache.save()).toBe(true);
    expect(first.cache.save()).toBe(false);

    const written = statSync(cacheFile, { bigint: true });
    const second = HashCache.load(cacheFile, later);
    expect(second.warning).toBeUndefined();
    expect(second.cache.size).toBe(50);
    expect(files.map((f) => hashOf(second.cache.hashFile(f)))).toEqual(hashes);
    expect(second.cache.counters).toMatchObject({ stats: 50, contentReads: 0, bytesRead: 0, hits: 50 });
    expect(second.cache.save()).toBe(false);
    const after = statSync(cacheFile, { bigint: true });
    expect([after.ino, after.mtimeNs]).toEqual([written.ino, written.mtimeNs]);

    // One change: saved again, the rest kept.
    writeFileSync(files[3]!, 'changed');
    expect(hashOf(second.cache.hashFile(files[3]!))).toBe(sha('changed'));
    expect(second.cache.save()).toBe(true);
    const third = HashCache.load(cacheFile, later).cache;
    expect(files.map((f) => hashOf(third.hashFile(f)))).toEqual(hashes.map((h, i) => (i === 3 ? sha('changed') : h)));
    expect(third.counters.contentReads).toBe(0);
  });

  // Room made first (an empty cache's reserve) for none, some or all of them: the arena grows past it as it must.
  test.each([0, 1000, 2500])('many entries made in one run (their fixed parts in a growing arena, %i reserved) answer, compare and save as they were made', (reserved) => {
    const files = Array.from({ length: 2500 }, (_, i) => write(`m${i % 7}/f${i}.txt`, `content ${i}`));
    const cacheFile = path.join(dir, 'cache');
    const cache = HashCache.load(cacheFile, later).cache;
    cache.reserve(reserved);
    const hashes = files.map((f) => hashOf(cache.hashFile(f)));
    expect(hashes.every((h, i) => h === sha(`content ${i}`))).toBe(true);
    // Looked up again in the same run: hits, from the arena.
    expect(files.map((f) => hashOf(cache.hashFile(f)))).toEqual(hashes);
    expect(cache.counters).toMatchObject({ contentReads: 2500, hits: 2500 });
    // Changed and read again in the same run: the new content, not the entry made first.
    writeFileSync(files[1234]!, 'changed');
    expect(hashOf(cache.hashFile(files[1234]!))).toBe(sha('changed'));
    hashes[1234] = sha('changed');
    expect(cache.save()).toBe(true);
    const loaded = HashCache.load(cacheFile, later).cache;
    expect(files.map((f) => hashOf(loaded.hashFile(f)))).toEqual(hashes);
    expect(loaded.counters.contentReads).toBe(0);
    // Found again with the same content, stat and digest: nothing to save.
    expect(loaded.save()).toBe(false);
  });

  test('a whole save larger than its buffer goes out in pieces, byte for byte what one buffer writes', () => {
    // One path longer than the pieces (300 bytes): its record goes out by itself.
    const deep = `${'d'.repeat(100)}/${'e'.repeat(100)}/${'f'.repeat(100)}/x.txt`;
    const files = [write(deep, 'deep'), ...Array.from({ length: 300 }, (_, i) => write(`p${i % 3}/f${i}.txt`, `content ${i}`))];
    const whole = path.join(dir, 'whole');
    const pieces = path.join(dir, 'pieces');
    const one = HashCache.load(whole, later).cache;
    const many = HashCache.load(pieces, { ...later, saveChunk: 300 }).cache;
    for (const f of files) {
      one.hashFile(f);
      many.hashFile(f);
    }
    expect([one.save(), many.save()]).toEqual([true, true]);
    expect(readFileSync(pieces).equals(readFileSync(whole))).toBe(true);
    // Loaded (records copied as they are), one changed, one dropped: saved whole again, in pieces.
    const again = HashCache.load(pieces, { ...later, saveChunk: 300 }).cache;
    writeFileSync(files[5]!, 'changed');
    for (const f of files.slice(0, -2)) again.hashFile(f);
    again.hashFile(files.at(-1)!);
    // files.at(-2) was not looked at: pruned.
    expect(again.prune()).toBe(1);
    expect(again.save()).toBe(true);
    const loaded = HashCache.load(pieces, later).cache;
    expect(loaded.size).toBe(files.length - 1);
    expect([files[0]!, files[5]!, files[6]!, files.at(-1)!].map((f) => hashOf(loaded.hashFile(f)))).toEqual([sha('deep'), sha('changed'), sha('content 5'), sha('content 299')]);
    expect(loaded.counters.contentReads).toBe(0);
  });

  test('entries not looked at are kept unless pruned', () => {
    const a = write('a', 'a');
    const b = write('b', 'b');
    const cacheFile = path.join(dir, 'cache');
    const first = HashCache.load(cacheFile, later).cache;
    first.hashFile(a);
    first.hashFile(b);
    first.save();
    const second = HashCache.load(cacheFile, later).cache;
    second.hashFile(a);
    expect(second.save()).toBe(false);
    expect(second.prune()).toBe(1);
    expect(second.save()).toBe(true);
    expect(HashCache.load(cacheFile, later).cache.size).toBe(1);
  });

  /** Four files hashed into a saved cache. */
  function savedFourFiles(): { files: string[]; cacheFile: string } {
    const files = ['a', 'b', 'c', 'd'].map((n) => write(`${n}.txt`, n.repeat(10)));
    const cacheFile = path.join(dir, 'cache');
    const first = HashCache.load(cacheFile, later).cache;
    for (const f of files) first.hashFile(f);
    first.save();
    return { files, cacheFile };
  }

  test('records not looked at are carried over byte for byte when another one changes', () => {
    const { files, cacheFile } = savedFourFiles();
    const second = HashCache.load(cacheFile, later).cache;
    writeFileSync(files[1]!, 'changed');
    second.hashFile(files[1]!); // the only record parsed; a, c, d stay raw
    expect(second.save()).toBe(true);
    const third = HashCache.load(cacheFile, later);
    expect(third.warning).toBeUndefined();
    expect(files.map((f) => hashOf(third.cache.hashFile(f)))).toEqual([sha('a'.repeat(10)), sha('changed'), sha('c'.repeat(10)), sha('d'.repeat(10))]);
    expect(third.cache.counters.contentReads).toBe(0);
  });

  test('records looked at but unchanged are copied as loaded, and the saved file is the one a fresh cache would write', () => {
    const { files, cacheFile } = savedFourFiles();
    // deltaMax 0: the change is saved whole, not appended to a delta.
    const second = HashCache.load(cacheFile, { ...later, deltaMax: 0 }).cache;
    for (const f of files) second.hashFile(f); // every record parsed, none changed
    expect(second.save()).toBe(false);
    writeFileSync(files[2]!, 'changed');
    second.hashFile(files[2]!);
    expect(second.save()).toBe(true);
    // The same content written from scratch, every record encoded anew.
    const fresh = new HashCache(path.join(dir, 'fresh'), later);
    for (const f of files) fresh.hashFile(f);
    fresh.save();
    expect(readFileSync(cacheFile).equals(readFileSync(path.join(dir, 'fresh')))).toBe(true);
    const third = HashCache.load(cacheFile, later);
    expect(third.warning).toBeUndefined();
    expect(files.map((f) => hashOf(third.cache.hashFile(f)))).toEqual([sha('a'.repeat(10)), sha('b'.repeat(10)), sha('changed'), sha('d'.repeat(10))]);
    expect(third.cache.counters.contentReads).toBe(0);
  });

  describe('a few changed entries are appended to a delta, not saved whole', () => {
    const delta = (cacheFile: string): string => `${cacheFile}.delta`;
    const stamp = (f: string): string => {
      const st = statSync(f, { bigint: true });
      return `${st.ino} ${st.size} ${st.mtimeNs}`;
    };
    /** A run that finds these files rewritten (and records them); the caller saves. */
    const changed = (cacheFile: string, changes: readonly (readonly [string, string])[], options: HashCacheOptions = later): HashCache => {
      const cache = HashCache.load(cacheFile, options).cache;
      for (const [file, content] of changes) {
        writeFileSync(file, content);
        cache.hashFile(file);
      }
      return cache;
    };

    test('the cache file is left as it was; loading applies the delta, later records winning', () => {
      const { files, cacheFile } = savedFourFiles();
      const before = stamp(cacheFile);
      expect(changed(cacheFile, [[files[1]!, 'changed once']]).save()).toBe(true);
      expect(changed(cacheFile, [[files[1]!, 'changed twice'], [files[3]!, 'changed']]).save()).toBe(true);
      expect(stamp(cacheFile)).toBe(before);
      expect(existsSync(delta(cacheFile))).toBe(true);
      const fourth = HashCache.load(cacheFile, later);
      expect(fourth.warning).toBeUndefined();
      expect(files.map((f) => hashOf(fourth.cache.hashFile(f)))).toEqual([sha('a'.repeat(10)), sha('changed twice'), sha('c'.repeat(10)), sha('changed')]);
      expect(fourth.cache.counters.contentReads).toBe(0);
      // Nothing changed: nothing written.
      expect(fourth.cache.save()).toBe(false);
    });

    /** How many records the delta holds: a header line, then records of [length][record][checksum of 16 bytes]. */
    const deltaRecords = (cacheFile: string): number => {
      const bytes = readFileSync(delta(cacheFile));
      let count = 0;
      for (let at = bytes.indexOf(10) + 1; at < bytes.length; at += 4 + bytes.readUInt32LE(at) + 16) count++;
      return count;
    };

    test('one cache saved twice appends each change once', () => {
      const { files, cacheFile } = savedFourFiles();
      const cache = changed(cacheFile, [[files[0]!, 'first']]);
      expect(cache.save()).toBe(true);
      expect(deltaRecords(cacheFile)).toBe(1);
      expect(cache.save()).toBe(false);
      writeFileSync(files[2]!, 'second');
      cache.hashFile(files[2]!);
      expect(cache.save()).toBe(true);
      expect(deltaRecords(cacheFile)).toBe(2);
    });

    test("the delta's entries are kept by prune once looked at, as loaded ones are; dropped if not", () => {
      const { files, cacheFile } = savedFourFiles();
      expect(changed(cacheFile, [[files[0]!, 'one'], [files[1]!, 'two']]).save()).toBe(true);
      const cache = HashCache.load(cacheFile, later).cache;
      expect(hashOf(cache.hashFile(files[0]!))).toBe(sha('one'));
      expect(hashOf(cache.hashFile(files[2]!))).toBe(sha('c'.repeat(10)));
      expect(cache.counters.contentReads).toBe(0);
      // files[1] (from the delta) and files[3] (loaded) were not looked at.
      expect(cache.prune()).toBe(2);
      expect(files.map((f) => cache.has(f))).toEqual([true, false, true, false]);
    });

    test('a change recorded, then found racy before the save, is saved racy: the next run reads it again', () => {
      const { files, cacheFile } = savedFourFiles();
      let shift = 60_000n;
      const cache = HashCache.load(cacheFile, { now: () => (BigInt(Date.now()) + shift) * 1_000_000n }).cache;
      writeFileSync(files[1]!, 'settled');
      cache.hashFile(files[1]!);
      shift = 0n; // the clock as it is: a file written now is too new to trust
      writeFileSync(files[1]!, 'too new');
      cache.hashFile(files[1]!);
      expect(cache.save()).toBe(true);
      expect(deltaRecords(cacheFile)).toBe(1);
      const next = HashCache.load(cacheFile, later).cache;
      expect(hashOf(next.hashFile(files[1]!))).toBe(sha('too new'));
      expect(next.counters.contentReads).toBe(1);
    });

    test('a delta cut short or with a flipped byte is applied up to the bad record; the next save is whole', () => {
      for (const damage of ['cut', 'flip'] as const) {
        const { files, cacheFile } = savedFourFiles();
        changed(cacheFile, [[files[0]!, 'first']]).save();
        changed(cacheFile, [[files[2]!, 'second']]).save();
        const bytes = readFileSync(delta(cacheFile));
        if (damage === 'flip') bytes[bytes.length - 30] = bytes[bytes.length - 30]! ^ 0x01;
        writeFileSync(delta(cacheFile), damage === 'cut' ? bytes.subarray(0, bytes.length - 1) : bytes);
        const fourth = HashCache.load(cacheFile, later).cache;
        expect(files.map((f) => hashOf(fourth.hashFile(f)))).toEqual([sha('first'), sha('b'.repeat(10)), sha('second'), sha('d'.repeat(10))]);
        // The first record held; the damaged one was not trusted, and the file was read again.
        expect(fourth.counters.contentReads).toBe(1);
        const before = stamp(cacheFile);
        expect(fourth.save()).toBe(true);
        expect(stamp(cacheFile)).not.toBe(before);
        expect(existsSync(delta(cacheFile))).toBe(false);
        rmSync(cacheFile);
      }
    });

    test('a delta of another cache body is ignored', () => {
      const { files, cacheFile } = savedFourFiles();
      changed(cacheFile, [[files[0]!, 'in the delta']]).save();
      const kept = readFileSync(delta(cacheFile));
      // Another run saves the cache whole (so it removes the delta); the old delta comes back.
      changed(cacheFile, [[files[0]!, 'newer'], [files[1]!, 'saved whole']], { ...later, deltaMax: 0 }).save();
      expect(existsSync(delta(cacheFile))).toBe(false);
      writeFileSync(delta(cacheFile), kept);
      const third = HashCache.load(cacheFile, later);
      expect(third.warning).toBeUndefined();
      // Applied, the old delta's entry for the first file would stand in for the newer one: a read.
      expect(files.slice(0, 2).map((f) => hashOf(third.cache.hashFile(f)))).toEqual([sha('newer'), sha('saved whole')]);
      expect(third.cache.counters.contentReads).toBe(0);
    });

    test('a dropped entry, or more changes than the delta may hold, saves whole and removes the delta', () => {
      const { files, cacheFile } = savedFourFiles();
      changed(cacheFile, [[files[0]!, 'x']]).save();
      expect(existsSync(delta(cacheFile))).toBe(true);
      const third = HashCache.load(cacheFile, later).cache;
      rmSync(files[3]!);
      expect(third.hashFile(files[3]!).kind).toBe('missing');
      const before = stamp(cacheFile);
      expect(third.save()).toBe(true);
      expect(stamp(cacheFile)).not.toBe(before);
      expect(existsSync(delta(cacheFile))).toBe(false);
      // A limit of one record: two changes are saved whole.
      const again = stamp(cacheFile);
      const fourth = changed(cacheFile, [[files[1]!, 'y'], [files[2]!, 'z']], { ...later, deltaMax: 1 });
      expect(fourth.save()).toBe(true);
      expect(stamp(cacheFile)).not.toBe(again);
      expect(existsSync(delta(cacheFile))).toBe(false);
      const fifth = HashCache.load(cacheFile, later).cache;
      expect(files.slice(0, 3).map((f) => hashOf(fifth.hashFile(f)))).toEqual([sha('x'), sha('y'), sha('z')]);
      expect(fifth.counters.contentReads).toBe(0);
    });
    test('changes to more than an eighth of the entries (past 64) are saved whole: a large delta would slow every load', () => {
      const files = Array.from({ length: 200 }, (_, i) => write(`many/${i}`, `${i}`.padStart(8, '0')));
      const cacheFile = path.join(dir, 'cache');
      const first = new HashCache(cacheFile, later);
      for (const f of files) first.hashFile(f);
      first.save();
      // 64 changed of 200 entries: the floor, appended.
      const some = files.slice(0, 64).map((f) => [f, 'first'] as const);
      expect(changed(cacheFile, some).save()).toBe(true);
      expect(existsSync(delta(cacheFile))).toBe(true);
      // One more record would pass both 64 and 200 / 8: saved whole, the delta removed.
      const before = stamp(cacheFile);
      expect(changed(cacheFile, [[files[64]!, 'one more']]).save()).toBe(true);
      expect(stamp(cacheFile)).not.toBe(before);
      expect(existsSync(delta(cacheFile))).toBe(false);
      const last = HashCache.load(cacheFile, later).cache;
      expect(hashOf(last.hashFile(files[0]!))).toBe(sha('first'));
      expect(hashOf(last.hashFile(files[64]!))).toBe(sha('one more'));
      expect(last.counters.contentReads).toBe(0);
    });
  });

  test('paths with tabs, newlines and quotes survive', () => {
    const names = ['tab\there', 'new\nline', '"quoted"', 'back\\slash', 'ünïcødé'];
    const files = names.map((n) => write(n, n));
    const cacheFile = path.join(dir, 'cache');
    const first = HashCache.load(cacheFile, later).cache;
    for (const f of files) first.hashFile(f);
    first.save();
    const second = HashCache.load(cacheFile, later);
    expect(second.warning).toBeUndefined();
    expect(files.map((f) => hashOf(second.cache.hashFile(f)))).toEqual(names.map((n) => sha(n)));
    expect(second.cache.counters.contentReads).toBe(0);
  });

  test('a missing cache file is an empty cache, without a warning', () => {
    const loaded = HashCache.load(path.join(dir, 'none', 'cache'));
    expect(loaded.warning).toBeUndefined();
    expect(loaded.cache.size).toBe(0);
    expect(loaded.cache.save()).toBe(false); // nothing to write
  });

  describe('a damaged cache file is ignored with a warning, never trusted', () => {
    let cacheFile: string;
    let file: string;
    let good: Buffer;
    beforeEach(() => {
      file = write('a.txt', 'real');
      cacheFile = path.join(dir, 'cache');
      const { cache } = HashCache.load(cacheFile, later);
      cache.hashFile(file);
      write('b.txt', 'b');
      cache.hashFile(path.join(dir, 'b.txt'));
      cache.save();
      good = readFileSync(cacheFile);
    });

    const damaged = (bytes: Buffer | string, reason: RegExp): void => {
      writeFileSync(cacheFile, bytes);
      const loaded = HashCache.load(cacheFile, later);
      expect(loaded.warning).toMatch(/^ignoring the hash cache /);
      expect(loaded.warning).toMatch(reason);
      expect(loaded.cache.size).toBe(0);
      expect(hashOf(loaded.cache.hashFile(file))).toBe(sha('real'));
      expect(loaded.cache.counters.contentReads).toBe(1);
      expect(loaded.cache.save()).toBe(true); // replaced by a good one
      expect(HashCache.load(cacheFile, later).warning).toBeUndefined();
    };

    test('torn (truncated)', () => damaged(good.subarray(0, good.length - 20), /checksum/));
    test('a flipped byte', () => {
      const bad = Buffer.from(good);
      bad.writeUInt8(bad.readUInt8(bad.length - 30) ^ 1, bad.length - 30);
      damaged(bad, /checksum/);
    });
    test('a stat field changed (the last byte: the ctime of the last record)', () => {
      const bad = Buffer.from(good);
      bad.writeUInt8(bad.readUInt8(bad.length - 1) ^ 0x40, bad.length - 1);
      damaged(bad, /checksum/);
    });
    test('trailing bytes', () => damaged(Buffer.concat([good, Buffer.from([0])]), /checksum/));
    test('garbage', () => damaged('{"format":"nodegraph-hashcache","version":1,"entries":[]}', /not a nodegraph hash cache/));
    test('the earlier text format (version 2)', () => damaged(`nodegraph-hashcache 2 0 ${'0'.repeat(64)}\n`, /version 2 is not 3/));
    test('empty', () => damaged('', /empty file/));
    test('a torn header', () => damaged('nodegraph-hashcache 3 1', /truncated header/));
    test('a count that does not match, checksum right', () => {
      const headerEnd = good.indexOf(10);
      const header = good.toString('latin1', 0, headerEnd).split(' ');
      expect(header.slice(0, 3)).toEqual(['nodegraph-hashcache', '3', '2']);
      damaged(Buffer.concat([Buffer.from(`${header[0]} 3 3 ${header[3]}`), good.subarray(headerEnd)]), /2 entries where the header says 3/);
    });
    test('a record cut short, checksum right', () => {
      const headerEnd = good.indexOf(10);
      const body = good.subarray(headerEnd + 1, good.length - 1);
      const sum = createHash('sha256').update(body).digest('hex');
      damaged(Buffer.concat([Buffer.from(`nodegraph-hashcache 3 2 ${sum}\n`), body]), /record 2 is cut short/);
    });
  });

  test('save writes atomically: no temporary file is left, and a failed save reports why', () => {
    const file = write('a', 'a');
    const cacheFile = path.join(dir, 'state', 'hashcache');
    const { cache } = HashCache.load(cacheFile, later);
    cache.hashFile(file);
    expect(cache.save()).toBe(true);
    expect(readdirSync(path.dirname(cacheFile))).toEqual(['hashcache']);

    const blocked = new HashCache(path.join(dir, 'a', 'cannot-be-under-a-file'), later);
    blocked.hashFile(file);
    expect(blocked.save()).toBe(false);
    expect(blocked.saveError).toMatch(/ENOTDIR|EEXIST/);
  });
});
