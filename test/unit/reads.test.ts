// The read recorder (src/nodefile/reads.ts) on real files: what an evaluation
// reads, probes and lists is recorded; what it cannot capture is named; reads
// from outside its async context, and after it, are not its.

import childProcess from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { recordReads } from '../../src/nodefile/reads.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(tmpdir(), 'nodegraph-reads-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const at = (name: string): string => path.join(dir, name);
const write = (name: string, text: string): string => {
  fs.mkdirSync(path.dirname(at(name)), { recursive: true });
  fs.writeFileSync(at(name), text);
  return at(name);
};
const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
const all = () => true;

test('contents by SHA-256 (sync, callback, promise, descriptor), probes by the kind found, listings by their entries; what is returned is unchanged', async () => {
  write('settings.json', '{"mode":"one"}\n');
  write('cb.txt', 'callback\n');
  write('promise.txt', 'promise\n');
  write('fd.txt', 'by descriptor\n');
  write('listed/b', '');
  write('listed/a', '');
  write('probed.txt', 'never read\n');
  const { value, reads } = await recordReads(async () => {
    const settings = JSON.parse(fs.readFileSync(at('settings.json'), 'utf8')) as { mode: string };
    const bytes = fs.readFileSync(at('settings.json'));
    const cb = await new Promise<string>((resolve, reject) => fs.readFile(at('cb.txt'), 'utf8', (e, t) => (e === null ? resolve(t) : reject(e))));
    const promised = await fsp.readFile(at('promise.txt'), { encoding: 'utf8' });
    const fd = fs.openSync(at('fd.txt'), 'r');
    const buffer = Buffer.alloc(64);
    const n = fs.readSync(fd, buffer);
    fs.closeSync(fd);
    const there = fs.existsSync(at('probed.txt')) && !fs.existsSync(at('absent.json'));
    const kind = fs.statSync(at('listed')).isDirectory();
    const names = fs.readdirSync(at('listed'));
    return { settings, bytes: bytes.length, cb, promised, read: buffer.subarray(0, n).toString(), there, kind, names: names.length };
  }, all);
  expect(value).toEqual({ settings: { mode: 'one' }, bytes: 15, cb: 'callback\n', promised: 'promise\n', read: 'by descriptor\n', there: true, kind: true, names: 2 });
  expect(Object.fromEntries(reads.files)).toEqual({
    [at('settings.json')]: sha('{"mode":"one"}\n'),
    [at('cb.txt')]: sha('callback\n'),
    [at('promise.txt')]: sha('promise\n'),
    [at('fd.txt')]: sha('by descriptor\n'),
  });
  expect(reads.probes).toEqual([
    { path: at('absent.json'), kind: 'absent' },
    { path: at('listed'), kind: 'dir', entries: ['a', 'b'] },
    { path: at('probed.txt'), kind: 'file' },
  ]);
  expect(reads.outside).toEqual([]);
});

test('what cannot be captured is named: a kernel interface, a descriptor not opened by path, a process run, an unreadable file', async () => {
  const before = fs.openSync(write('opened-before.txt', 'x'), 'r');
  const locked = write('locked.txt', 'secret');
  fs.chmodSync(locked, 0);
  const root = process.getuid?.() === 0;
  try {
    const { reads } = await recordReads(async () => {
      fs.readFileSync('/proc/self/status', 'utf8');
      fs.readSync(before, Buffer.alloc(1));
      // The call is what is named: this one Node refuses before it starts a process (a cwd that is no path).
      expect(() => childProcess.spawnSync('true', ['--at-load'], { cwd: 42 as never })).toThrow(/cwd/);
      try {
        fs.readFileSync(locked);
      } catch {
        // as a Nodefile that falls back would
      }
    }, all);
    expect(reads.outside).toEqual([
      { why: 'kernel', path: '/proc/self/status' },
      { why: 'fd', fd: before },
      { why: 'process', command: ['true', '--at-load'] },
      ...(root ? [] : [{ why: 'unreadable', path: locked, code: 'EACCES' }]),
    ]);
    // root reads it anyway: then it is a file like any other.
    expect([...reads.files.keys()]).toEqual(root ? [locked] : []);
  } finally {
    fs.closeSync(before);
  }
});

test('only the evaluation is recorded: not a read made meanwhile from another async context, not one after it, not a path `keep` refuses; the originals are back after', async () => {
  write('mine.txt', 'mine');
  write('theirs.txt', 'theirs');
  write('later.txt', 'later');
  write('module.ts', 'export {}');
  const original = fs.readFileSync;
  let started!: () => void;
  const evaluating = new Promise<void>((resolve) => (started = resolve));
  let done!: () => void;
  const theirsRead = new Promise<void>((resolve) => (done = resolve));
  // Someone else's work (a watcher, a heartbeat), begun before the evaluation and reading during it.
  const other = (async () => {
    await evaluating;
    fs.readFileSync(at('theirs.txt'));
    done();
  })();
  let later: (() => void) | undefined;
  const { reads } = await recordReads(async () => {
    fs.readFileSync(at('mine.txt'));
    fs.readFileSync(at('module.ts'));
    started();
    await theirsRead;
    // A task action the Nodefile declared: called by the executor after the evaluation.
    later = () => fs.readFileSync(at('later.txt'));
  }, (p) => !p.endsWith('.ts'));
  await other;
  later!();
  expect([...reads.files.keys()]).toEqual([at('mine.txt')]);
  expect(fs.readFileSync).toBe(original);
});
