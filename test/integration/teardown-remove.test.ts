// removePath (src/util/mounts.ts): what teardown and the node kit remove, with real files and real bind mounts
// (root only, as on the CI machine and a node): a folder with something
// mounted below it, or a file mounted on, is refused and its mounted source kept.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { removePath } from '../../src/util/mounts.ts';

const root = process.getuid?.() === 0;
let dir: string;
const mounted: string[] = [];
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-remove-'));
});
afterEach(() => {
  for (const m of mounted.splice(0).reverse()) execFileSync('umount', [m]);
  rmSync(dir, { recursive: true, force: true });
});

const bind = (source: string, target: string): void => {
  execFileSync('mount', ['--bind', source, target]);
  mounted.push(target);
};

test('a file, a folder and a path already gone are removed', () => {
  writeFileSync(path.join(dir, 'file'), 'x');
  mkdirSync(path.join(dir, 'tree/deep'), { recursive: true });
  writeFileSync(path.join(dir, 'tree/deep/leaf'), 'y');
  expect(removePath(path.join(dir, 'file'))).toBeUndefined();
  expect(removePath(path.join(dir, 'tree'))).toBeUndefined();
  expect(removePath(path.join(dir, 'never-there'))).toBeUndefined();
  expect([existsSync(path.join(dir, 'file')), existsSync(path.join(dir, 'tree'))]).toEqual([false, false]);
});

test.runIf(root)('a folder with a mount below it and a file mounted on are refused; what is mounted stays', () => {
  mkdirSync(path.join(dir, 'host'));
  writeFileSync(path.join(dir, 'host/precious'), 'keep me');
  writeFileSync(path.join(dir, 'host-file'), 'keep me too');
  mkdirSync(path.join(dir, 'rootfs/mnt'), { recursive: true });
  writeFileSync(path.join(dir, 'rootfs/hosts'), 'stand-in');
  bind(path.join(dir, 'host'), path.join(dir, 'rootfs/mnt'));
  bind(path.join(dir, 'host-file'), path.join(dir, 'rootfs/hosts'));

  expect(removePath(path.join(dir, 'rootfs'))).toMatch(/^not removing .*\/rootfs: mounted below it: .*\/rootfs\/(mnt|hosts)/);
  expect(removePath(path.join(dir, 'rootfs/hosts'))).toBe(`not removing ${path.join(dir, 'rootfs/hosts')}: mounted below it: ${path.join(dir, 'rootfs/hosts')}`);
  expect(readFileSync(path.join(dir, 'host/precious'), 'utf8')).toBe('keep me');
  expect(readFileSync(path.join(dir, 'host-file'), 'utf8')).toBe('keep me too');
});
