// The seal's digest names the engine that wrote it (state/seal.ts engineStamp):
// its version, and the size and mtime of each of its own files, so a seal from
// before an edit to the engine's code is not trusted after it. And the digest
// of the declarations tells one field from another.

import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, test } from 'vitest';
import type { Declarations, DeclaredTask } from '../../src/nodefile/builder.ts';
import { declarationsDigest, engineStamp } from '../../src/state/seal.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

test('the engine stamp moves with the version and with any of the engine files, and with nothing else', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'nodegraph-stamp-'));
  dirs.push(root);
  // The tests run the sources, so the engine's files are src/ below the root.
  mkdirSync(path.join(root, 'src/deep'), { recursive: true });
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ version: '1.0.0' }));
  writeFileSync(path.join(root, 'src/a.ts'), 'export const a = 1;\n');
  writeFileSync(path.join(root, 'src/deep/b.ts'), 'export const b = 2;\n');
  const url = pathToFileURL(`${root}/`);
  const first = engineStamp(url);
  expect(engineStamp(url)).toBe(first);
  writeFileSync(path.join(root, 'README.md'), 'not the engine\n');
  expect(engineStamp(url)).toBe(first);

  utimesSync(path.join(root, 'src/deep/b.ts'), 1_000_000, 1_000_000);
  const edited = engineStamp(url);
  expect(edited).not.toBe(first);

  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ version: '1.0.1' }));
  expect(engineStamp(url)).not.toBe(edited);
});

test('the declarations digest tells fields apart by their bytes and their lengths, ASCII or not, short or long', () => {
  const digestOf = (...run: string[]): string | undefined => {
    const task = { id: 't', spec: { run }, inputs: {}, after: [], outputs: [], site: { get: () => undefined } } as unknown as DeclaredTask;
    const declarations: Declarations = { file: '/p/Nodefile.ts', dir: '/p', tasks: [task], pools: new Map(), failures: [] };
    return declarationsDigest(declarations, {}, '/p/.nodegraph');
  };
  const long = 'a'.repeat(64);
  const cases = [
    ['echo', 'e'],
    ['echo', 'é'],
    ['echo', 'ê'],
    // The same low byte as é: a copy that kept only that byte would make them one.
    ['echo', 'ǩ'],
    ['x', 'yz'],
    ['xy', 'z'],
    ['echo', long],
    ['echo', `${long}a`],
    ['echo', `${long.slice(1)}é`],
    ['echo', `${long}é`],
  ];
  const digests = cases.map((run) => digestOf(...run));
  expect(new Set(digests).size).toBe(cases.length);
  // The same declarations, the same digest.
  expect(cases.map((run) => digestOf(...run))).toEqual(digests);
});
