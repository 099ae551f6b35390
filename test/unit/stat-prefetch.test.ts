// Stats taken ahead on a worker thread (src/hash/prefetch.ts): each slot says
// what statSync said of its path, nothing is stat'ed before go(), a closed
// prefetch answers nothing, and the hash cache given one observes exactly what
// it observes without (the engine property test runs whole applies both ways).

import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { HashCache, writeStat, type FileObservation } from '../../src/hash/cache.ts';
import { StatPrefetch, Verdict } from '../../src/hash/prefetch.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'ng-prefetch-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const sha = (s: string): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;
/** A clock a minute ahead: every file looks old, so no entry is racy. */
const later = { now: (): bigint => (BigInt(Date.now()) + 60_000n) * 1_000_000n };

function write(name: string, content: string): string {
  const file = path.join(dir, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  return file;
}

/** A hash cache saved with these files in it (none racy); load() loads it again, as a new run would. */
function saveCache(...files: string[]): void {
  const cache = new HashCache(CACHE(), later);
  for (const file of files) cache.hashFile(file);
  expect(cache.save()).toBe(true);
}
const CACHE = (): string => path.join(dir, 'cache');
const load = (): HashCache => HashCache.load(CACHE(), later).cache;

/** Every path filled, as the engine uses it: started, let go, then read. */
function prefetch(paths: string[]): StatPrefetch {
  const stats = StatPrefetch.start(paths, 0);
  if (stats === undefined) throw new Error('no worker');
  stats.go();
  return stats;
}

describe('StatPrefetch', () => {
  test("with sumOf, the worker takes the file's CRC-32 once let go; without, or for a file not there, there is none", () => {
    const content = Buffer.alloc(3 * (1 << 20) + 12345);
    for (let i = 0; i < content.length; i++) content[i] = (i * 31 + (i >> 11)) & 0xff;
    const file = write('journal', '');
    writeFileSync(file, content);
    const summing = StatPrefetch.startJoined(file, 1, 0, file);
    if (summing === undefined) throw new Error('no worker');
    try {
      summing.go();
      expect(summing.sum()).toBe(crc32(content));
      expect(summing.ready(0)).toBe(true);
    } finally {
      summing.close();
    }
    expect(summing.sum()).toBeUndefined();
    const missing = StatPrefetch.startJoined(file, 1, 0, path.join(dir, 'missing'));
    missing!.go();
    expect(missing!.sum()).toBeUndefined();
    expect(missing!.ready(0)).toBe(true);
    missing!.close();
    const none = prefetch([file]);
    expect(none.sum()).toBeUndefined();
    none.close();
  });

  test('each slot holds what statSync said of its path', () => {
    const file = write('a/file.txt', 'hello');
    const folder = path.join(dir, 'a');
    const link = path.join(dir, 'link');
    symlinkSync(file, link);
    const missing = path.join(dir, 'missing');
    const underFile = path.join(file, 'x'); // ENOTDIR: nothing readable is there
    // Every field its own: an mtime a day before its ctime, with nanoseconds.
    const old = write('b/old.bin', 'x'.repeat(70_000));
    utimesSync(old, new Date(Date.now() - 86_400_000), new Date(Date.now() - 86_400_000 + 0.123));
    const paths = [file, folder, link, missing, underFile, old];
    const stats = prefetch(paths);
    try {
      expect(stats.ready(0)).toBe(true);
      // On this Node the worker stats with Node's binding: this test is the one that holds it to statSync.
      expect(stats.binding).toBe(true);
      paths.forEach((p, slot) => {
        expect(stats.ready(slot)).toBe(true);
        let real: ReturnType<typeof statSync> | undefined;
        try {
          real = statSync(p, { bigint: true, throwIfNoEntry: false });
        } catch {
          real = undefined;
        }
        const got = stats.stat(slot);
        if (real === undefined) {
          expect(got).toBeUndefined();
          expect(stats.mode(slot)).toBe(0);
          return;
        }
        expect(got).toEqual({ dev: real.dev, ino: real.ino, size: real.size, mtimeNs: real.mtimeNs, ctimeNs: real.ctimeNs, mode: real.mode });
        expect(stats.mode(slot)).toBe(Number(real.mode));
        expect(stats.size(slot)).toBe(Number(real.size));
      });
      expect(stats.ready(paths.length)).toBe(false);
      expect(stats.ready(-1)).toBe(false);
    } finally {
      stats.close();
    }
  });

  test('paths given as UTF-8 bytes in shared memory are read there, each slot of its own path', () => {
    // As the seal gives them (state/seal.ts): each ended by a NUL, some beyond ASCII, one missing.
    const names = ['é/één.txt', 'plain', '日本/語.txt', 'missing-ü'];
    const paths = names.map((name, i) => (name.startsWith('missing') ? path.join(dir, name) : write(name, 'x'.repeat(i + 1))));
    const joined = Buffer.from(paths.map((p) => `${p}\0`).join(''), 'utf8');
    // At an offset in a larger buffer, as the seal's paths lie in its body.
    const shared = Buffer.from(new SharedArrayBuffer(joined.length + 11));
    joined.copy(shared, 7);
    const stats = StatPrefetch.startJoined(shared.subarray(7, 7 + joined.length) as Buffer<SharedArrayBuffer>, paths.length, 0);
    if (stats === undefined) throw new Error('no worker');
    try {
      stats.go();
      paths.forEach((p, slot) => {
        expect(stats.ready(slot)).toBe(true);
        const real = statSync(p, { bigint: true, throwIfNoEntry: false });
        if (real === undefined) expect(stats.stat(slot)).toBeUndefined();
        else expect(stats.stat(slot)).toMatchObject({ ino: real.ino, size: real.size });
      });
      expect(stats.size(2)).toBe(3);
    } finally {
      stats.close();
    }
  });

  test('given stats to compare with, each slot is the verdict: the same stat, another, or no regular file', () => {
    const same = write('same.txt', 'one');
    const touched = write('touched.txt', 'two');
    const edited = write('edited.txt', 'three');
    const folder = path.join(dir, 'folder');
    mkdirSync(folder);
    const paths = [same, touched, edited, folder, path.join(dir, 'missing'), path.join(same, 'under')];
    // As the seal keeps them: a stat of 40 bytes at a stride of 72 (its content digest after it), past a head of 88.
    const stride = 72;
    const sealed = Buffer.from(new SharedArrayBuffer(88 + paths.length * stride));
    paths.forEach((p, slot) => {
      const st = statSync(p, { bigint: true, throwIfNoEntry: false });
      if (st !== undefined) writeStat(sealed, 88 + slot * stride, st);
    });
    utimesSync(touched, new Date(Date.now() - 5_000), new Date(Date.now() - 5_000));
    writeFileSync(edited, 'THREE');
    const stats = StatPrefetch.startJoined(paths.join('\0'), paths.length, 0, undefined, { buffer: sealed.buffer, offset: 88, stride });
    if (stats === undefined) throw new Error('no worker');
    try {
      expect(stats.comparing).toBe(true);
      stats.go();
      expect(paths.map((_, slot) => (stats.ready(slot) ? stats.verdict(slot) : 'not ready'))).toEqual([
        Verdict.Same,
        Verdict.Other,
        Verdict.Other,
        Verdict.NotFile,
        Verdict.NotFile,
        Verdict.NotFile,
      ]);
    } finally {
      stats.close();
    }
  });

  test('comparing, the main thread takes paths from the end of the list rather than wait: each path is judged once, by one thread or the other, as the worker judges it', () => {
    // 2,000 files: every third at its sealed stat, every third touched since, every third gone.
    const paths = Array.from({ length: 2000 }, (_, i) => write(`many/${i}.txt`, `file ${i}`));
    const stride = 40;
    const sealed = Buffer.from(new SharedArrayBuffer(paths.length * stride));
    paths.forEach((p, slot) => writeStat(sealed, slot * stride, statSync(p, { bigint: true })));
    const expected = paths.map((p, slot) => {
      if (slot % 3 === 1) utimesSync(p, new Date(Date.now() - 5_000), new Date(Date.now() - 5_000));
      if (slot % 3 === 2) rmSync(p);
      return [Verdict.Same, Verdict.Other, Verdict.NotFile][slot % 3];
    });
    // Paths as UTF-8 bytes ending with a NUL, as the seal keeps them, and as one string without the last NUL.
    const joined = paths.join('\0');
    const bytes = Buffer.from(new SharedArrayBuffer(Buffer.byteLength(joined) + 1));
    bytes.write(joined);
    for (const given of [joined, bytes]) {
      const stats = StatPrefetch.startJoined(given, paths.length, 0, undefined, { buffer: sealed.buffer, offset: 0, stride });
      if (stats === undefined) throw new Error('no worker');
      try {
        stats.go();
        // Asked for the last path first, this thread takes it (and a few before it) at once;
        // then the worker goes on alone for a while (once it has started: it says which stat
        // it uses just before its first), and this thread takes what is left at the end.
        expect(stats.ready(paths.length - 1)).toBe(true);
        expect(stats.takenHere).toBeGreaterThan(0);
        const sleep = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
        for (let waited = 0; !stats.binding && waited < 5000; waited += 5) sleep(5);
        sleep(5);
        expect(paths.map((_, slot) => (stats.ready(slot) ? stats.verdict(slot) : 'not ready'))).toEqual(expected);
        expect(stats.takenHere).toBeLessThan(paths.length);
      } finally {
        stats.close();
      }
    }
  });

  test('waiting for the worker does not load node:perf_hooks (the global performance loads it)', () => {
    // In a process of its own: this one has loaded them all. Its main thread asks for the last of 3,000
    // paths as soon as the worker may start, so it waits; then it lists what it loaded since it started it.
    const paths = Array.from({ length: 3000 }, (_, i) => write(`many/${i}`, ''));
    const script = write(
      'wait.mjs',
      `import { StatPrefetch } from ${JSON.stringify(new URL('../../src/hash/prefetch.ts', import.meta.url).href)};
const paths = ${JSON.stringify(paths)};
const before = new Set(process.moduleLoadList);
const stats = StatPrefetch.start(paths, 0);
stats.go();
const ready = stats.ready(paths.length - 1);
stats.close();
console.log(JSON.stringify({ ready, loaded: process.moduleLoadList.filter((m) => !before.has(m) && m.startsWith('NativeModule')) }));
`,
    );
    const result = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    expect(result.stderr).toBe('');
    const { ready, loaded } = JSON.parse(result.stdout) as { ready: boolean; loaded: string[] };
    expect(ready).toBe(true);
    // Starting a worker loads node:worker_threads and what it needs; a wait, nothing of its own.
    expect(loaded).toContain('NativeModule worker_threads');
    expect(loaded).not.toContain('NativeModule perf_hooks');
  });

  test('nothing is stat\'ed before go(), and nothing is answered after close()', () => {
    const file = write('f', 'one');
    const stats = StatPrefetch.start([file], 0)!;
    expect(stats.ready(0)).toBe(false);
    // Changed between start and go: the slot is of the file as it is at go().
    writeFileSync(file, 'three');
    stats.go();
    expect(stats.ready(0)).toBe(true);
    expect(stats.size(0)).toBe(5);
    stats.close();
    expect(stats.ready(0)).toBe(false);
  });

  test('too few paths, or a path that cannot be passed, start no worker', () => {
    expect(StatPrefetch.start([path.join(dir, 'a')], 2)).toBeUndefined();
    expect(StatPrefetch.start([], 0)).toBeUndefined();
    expect(StatPrefetch.start([path.join(dir, 'a\0b')], 0)).toBeUndefined();
  });

  test('NODEGRAPH_STAT_AHEAD sets the smallest number of paths worth a worker', () => {
    const before = process.env['NODEGRAPH_STAT_AHEAD'];
    try {
      process.env['NODEGRAPH_STAT_AHEAD'] = 'off';
      expect(StatPrefetch.start([path.join(dir, 'a')])).toBeUndefined();
      process.env['NODEGRAPH_STAT_AHEAD'] = '2';
      expect(StatPrefetch.start([path.join(dir, 'a')])).toBeUndefined();
      process.env['NODEGRAPH_STAT_AHEAD'] = '1';
      const stats = StatPrefetch.start([path.join(dir, 'a')]);
      expect(stats).toBeDefined();
      stats?.close();
    } finally {
      if (before === undefined) delete process.env['NODEGRAPH_STAT_AHEAD'];
      else process.env['NODEGRAPH_STAT_AHEAD'] = before;
    }
  });
});

describe('the hash cache with stats taken ahead', () => {
  test('observes what it observes without them, hits read nothing', () => {
    const same = write('same', 'unchanged');
    const edited = write('edited', 'before');
    const folder = path.join(dir, 'folder');
    mkdirSync(folder);
    const missing = path.join(dir, 'missing');
    saveCache(same, edited);
    writeFileSync(edited, 'after, longer');

    const paths = [same, edited, folder, missing];
    const stats = prefetch(paths);
    const ahead = load();
    const plain = load();
    try {
      const seenAhead: FileObservation[] = paths.map((p, slot) => ahead.hashFile(p, stats, slot));
      const seenPlain: FileObservation[] = paths.map((p) => plain.hashFile(p));
      expect(seenAhead).toEqual(seenPlain);
      expect(seenAhead[0]).toMatchObject({ kind: 'file', hash: sha('unchanged') });
      expect(seenAhead[1]).toMatchObject({ kind: 'file', hash: sha('after, longer') });
      expect(seenAhead[2]!.kind).toBe('directory');
      expect(seenAhead[3]!.kind).toBe('missing');
      expect(ahead.counters).toEqual(plain.counters);
      expect(ahead.counters.hits).toBe(1);
      expect(ahead.counters.contentReads).toBe(1);
    } finally {
      stats.close();
    }
  });

  test('a stat taken ahead that the file no longer matches costs a read, never a wrong hash', () => {
    const file = write('f', 'first');
    saveCache(file);
    const stats = prefetch([file]);
    try {
      expect(stats.ready(0)).toBe(true);
      // Rewritten after the stat was taken, to the same size, its mtime put back.
      const before = statSync(file);
      writeFileSync(file, 'other');
      utimesSync(file, before.atime, before.mtime);
      const loaded = load();
      // The stat taken ahead still matches the cached record: the cache answers for
      // the file as it was then, as it would had it stat'ed it then itself.
      expect(loaded.hashFile(file, stats, 0)).toMatchObject({ hash: sha('first') });
      // Without an entry to match, the read is of the file now; the stat ahead is not
      // the read file's (its ctime moved), so the read is checked with a new stat.
      const fresh = new HashCache(undefined, later);
      expect(fresh.hashFile(file, stats, 0)).toMatchObject({ hash: sha('other') });
      expect(fresh.counters.contentReads).toBe(2);
    } finally {
      stats.close();
    }
  });

  test('a prefetch that was closed, or a slot it never filled, leaves the cache to stat for itself', () => {
    const file = write('g', 'content');
    saveCache(file);
    const stats = StatPrefetch.start([file], 0)!;
    // Never let go: nothing is filled, and hashFile must not wait for it.
    const waiting = load();
    expect(waiting.hashFile(file, stats, 0)).toMatchObject({ kind: 'file', hash: sha('content') });
    stats.go();
    stats.close();
    const closed = load();
    expect(closed.hashFile(file, stats, 0)).toMatchObject({ kind: 'file', hash: sha('content') });
    expect(closed.counters).toMatchObject({ stats: 1, hits: 1, contentReads: 0 });
  });
});
