// The seal's digest names the engine that wrote it (state/seal.ts engineStamp):
// its version, and the size and mtime of each of its own files, so a seal from
// before an edit to the engine's code is not trusted after it.

import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, test } from 'vitest';
import { engineStamp } from '../../src/state/seal.ts';

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
