// `npm pack` makes a package that installs into an empty folder and runs:
// there, below node_modules, Node will not strip types, so it must be JS.

import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { repo } from '../support/rig.ts';

test('the packed package installs into an empty folder and runs nodegraph --version', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'nodegraph-pack-'));
  // Pack a copy: packing builds and removes dist/ in the folder it runs in, and
  // the other tests run the checkout's CLI meanwhile.
  const copy = mkdtempSync(path.join(tmpdir(), 'nodegraph-src-'));
  for (const entry of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'bin', 'src', 'scripts', 'README.md']) {
    cpSync(path.join(repo, entry), path.join(copy, entry), { recursive: true });
  }
  symlinkSync(path.join(repo, 'node_modules'), path.join(copy, 'node_modules'));
  const home = mkdtempSync(path.join(tmpdir(), 'nodegraph-install-'));
  try {
    const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env['PATH']}` };
    const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: copy, env, encoding: 'utf8' }).trim().split('\n').at(-1)!;
    expect(existsSync(path.join(copy, 'dist'))).toBe(false); // postpack cleaned up after itself
    execFileSync('npm', ['init', '-y'], { cwd: home, env, stdio: 'ignore' });
    execFileSync('npm', ['install', '--silent', '--no-audit', '--no-fund', path.join(out, name)], { cwd: home, env, stdio: 'ignore' });
    const version = execFileSync(process.execPath, [path.join(home, 'node_modules/.bin/nodegraph'), '--version'], { cwd: home, encoding: 'utf8' });
    expect(version).toMatch(/^nodegraph \d+\.\d+\.\d+\n$/);
    expect(existsSync(path.join(home, 'node_modules/nodegraph/dist/cli/main.js'))).toBe(true);
  } finally {
    rmSync(out, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
    rmSync(copy, { recursive: true, force: true });
  }
}, 180_000);
