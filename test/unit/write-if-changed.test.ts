// ctx.writeIfChanged: atomic, only when something differs, and keeping what
// the file was (its mode, its owner, the link that names it).

import { chmodSync, chownSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { writeIfChanged } from '../../src/observe/context.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-write-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const at = (name: string): string => path.join(dir, name);
const modeOf = (name: string): number => statSync(at(name)).mode & 0o7777;

test('writes a new file, then nothing while the bytes and the mode are the same', () => {
  expect(writeIfChanged(at('a/b.conf'), 'one\n')).toBe(true);
  const ino = statSync(at('a/b.conf')).ino;
  expect(writeIfChanged(at('a/b.conf'), 'one\n')).toBe(false);
  expect(statSync(at('a/b.conf')).ino).toBe(ino);
  expect(writeIfChanged(at('a/b.conf'), 'one\n', 0o640)).toBe(true);
  expect(modeOf('a/b.conf')).toBe(0o640);
  expect(readFileSync(at('a/b.conf'), 'utf8')).toBe('one\n');
});

test('a file rewritten keeps its mode, unless told another', () => {
  for (const mode of [0o600, 0o755]) {
    writeFileSync(at('f'), 'old\n');
    chmodSync(at('f'), mode);
    expect(writeIfChanged(at('f'), 'new\n')).toBe(true);
    expect(readFileSync(at('f'), 'utf8')).toBe('new\n');
    expect(modeOf('f')).toBe(mode);
  }
  expect(writeIfChanged(at('f'), 'newer\n', 0o644)).toBe(true);
  expect(modeOf('f')).toBe(0o644);
});

test("a file another user owns is still theirs after a rewrite (when nodegraph may give it away: root)", () => {
  if (process.getuid?.() !== 0) return;
  writeFileSync(at('secret'), 'old\n');
  chmodSync(at('secret'), 0o600);
  chownSync(at('secret'), 65534, 65534);
  expect(writeIfChanged(at('secret'), 'new\n')).toBe(true);
  const st = statSync(at('secret'));
  expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([65534, 65534, 0o600]);
  expect(readFileSync(at('secret'), 'utf8')).toBe('new\n');
});

test('a symlink is written through: the file it names changes, the link stays a link', () => {
  writeFileSync(at('real.conf'), 'old\n');
  symlinkSync('real.conf', at('current.conf'));
  expect(writeIfChanged(at('current.conf'), 'new\n')).toBe(true);
  expect(lstatSync(at('current.conf')).isSymbolicLink()).toBe(true);
  expect(readlinkSync(at('current.conf'))).toBe('real.conf');
  expect(readFileSync(at('real.conf'), 'utf8')).toBe('new\n');
  expect(writeIfChanged(at('current.conf'), 'new\n')).toBe(false);
});
