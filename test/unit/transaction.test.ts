import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { parseDuration } from '../../src/util/duration.ts';
import { generationChanges, type Generation } from '../../src/transaction/manifest.ts';
import type { ContentHash } from '../../src/ids.ts';
import { readPreserved, restorePreserved, savePreserved } from '../../src/transaction/preserve.ts';
import { describeTree } from '../support/tree.ts';

test('durations: a number and a unit', () => {
  expect(parseDuration('500ms')).toBe(500);
  expect(parseDuration('10s')).toBe(10_000);
  expect(parseDuration('1.5s')).toBe(1500);
  expect(parseDuration('2m')).toBe(120_000);
  expect(parseDuration('1h')).toBe(3_600_000);
  for (const bad of ['10', 's', '10 sec', '-1s', '']) expect(parseDuration(bad)).toBeUndefined();
});

const generation = (files: Record<string, string>, env: Generation['env'] = {}): Generation => ({
  format: 'nodegraph-generation',
  version: 1,
  number: 1,
  createdAt: '',
  status: 'applied',
  nodefile: '/p/Nodefile.ts',
  files: Object.entries(files).map(([p, sha256]) => ({ path: p, sha256, size: 1, mode: 0o644, stored: 'copy' as const })),
  env,
  digest: '',
  ran: [],
  destroyed: [],
});

test('what changed between two generations: files by content, relative to the Nodefile, gone ones named; env values by name', () => {
  const before = generation({ '/p/Nodefile.ts': 'a', '/p/conf.json': 'b', '/etc/old.json': 'c' }, { A: '1', B: null });
  const after = generation({ '/p/Nodefile.ts': 'a', '/p/conf.json': 'B', '/p/new.json': 'd' }, { A: '1', B: 'x' });
  expect(generationChanges(before, after)).toEqual({ files: ['conf.json', 'new.json', '../etc/old.json (gone)'], env: ['B'] });
  expect(generationChanges(undefined, after).files).toEqual(['Nodefile.ts', 'conf.json', 'new.json']);
  // Sealed values compare by their keyed digest: sealed twice (another IV), one value is unchanged.
  const sealed = (digest: string, sealed: string) => ({ digest: `sha256:${digest}` as ContentHash, sealed });
  const one = generation({}, { A: sealed('1', 'aes-256-gcm:x'), B: sealed('2', 'aes-256-gcm:y') });
  const two = generation({}, { A: sealed('1', 'aes-256-gcm:z'), B: sealed('3', 'aes-256-gcm:y') });
  expect(generationChanges(one, two).env).toEqual(['B']);
});

test('a preserved tree is given back whole: changed, added, removed and retyped entries; an absent path is removed again', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-preserve-'));
  try {
    const shared = path.join(dir, 'shared');
    mkdirSync(path.join(shared, 'a/b'), { recursive: true });
    writeFileSync(path.join(shared, 'a/b/file'), 'one');
    symlinkSync('a/b/file', path.join(shared, 'link'));
    const before = describeTree(shared);
    const saved = savePreserved([shared, path.join(dir, 'absent')], path.join(dir, 'saved'));
    expect(saved.ok).toBe(true);
    if (!saved.ok) return;
    writeFileSync(path.join(shared, 'a/b/file'), 'two');
    rmSync(path.join(shared, 'link'));
    mkdirSync(path.join(shared, 'link'));
    writeFileSync(path.join(shared, 'extra'), 'x');
    mkdirSync(path.join(dir, 'absent/deeper'), { recursive: true });
    expect(restorePreserved(saved.value)).toEqual([]);
    expect(describeTree(shared)).toEqual(before);
    expect(describeTree(path.join(dir, 'absent'))).toEqual({});
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a damaged preserved manifest is refused, never acted on: a renamed key, another path, a changed mode, no file', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-preserve-'));
  try {
    const kept = path.join(dir, 'kept.txt');
    writeFileSync(kept, 'mine');
    const saved = path.join(dir, 'saved');
    expect(savePreserved([kept], saved).ok).toBe(true);
    const manifest = path.join(saved, 'preserved.json');
    const text = readFileSync(manifest, 'utf8');
    expect(readPreserved(saved)).toMatchObject({ ok: true, value: { paths: [{ path: kept }] } });
    const damaged = [
      text.replace('"entries"', '"dntries"'),
      text.replace(JSON.stringify(kept), JSON.stringify(dir)),
      text.replace(/"mode":\d+/, '"mode":511'),
      text.replace(/"rel":""/, '"rel":"../x"'),
      '{"paths":[',
    ];
    for (const bad of damaged) {
      writeFileSync(manifest, bad);
      const read = readPreserved(saved);
      expect(read.ok, bad).toBe(false);
      expect(!read.ok && read.error).toMatch(/^are damaged: /);
    }
    rmSync(manifest);
    expect(readPreserved(saved)).toEqual({ ok: false, error: `are gone (${manifest} cannot be read)` });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
