// `npm ci` and `npm install` run this (the `install` script), in a checkout and
// where the package is installed: it compiles native/spawnd.c, the helper
// that starts task commands, to node_modules/.nodegraph/spawnd below the
// package's root, where src/execute/runner.ts (dist/lib/ in a package) looks
// for it. A command started by spawnd costs the engine a posix_spawn rather
// than a fork of the engine (see native/spawnd.c).
//
// It is optional. Without a C compiler (cc, or $CC) nothing is built, one
// line says so, and the engine spawns task commands itself. An install never
// fails for it.
//
// In a checkout it then bundles the Nodefile kit's dependencies
// (scripts/bundle-deps.ts, which the package does not ship): this is the one
// script a package's consumer runs too, so it is the one script the package
// names, and every file it runs is in the package.
//
// Plain JavaScript: below node_modules Node strips no types.
//
//   node scripts/build-spawnd.mjs

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const source = path.join(root, 'native', 'spawnd.c');
const target = path.join(root, 'node_modules', '.nodegraph', 'spawnd');
const work = `${target}.new-${process.pid}`;

// A package carries the source, not a binary of this machine's: it is compiled where it is installed.
if (process.env['npm_command'] === 'pack' || process.env['npm_command'] === 'publish') process.exit(0);

mkdirSync(path.dirname(target), { recursive: true });
const cc = process.env['CC'] ?? 'cc';
const built = spawnSync(cc, ['-O2', '-std=c11', '-Wall', '-Wextra', '-o', work, source], { encoding: 'utf8' });
if (built.error !== undefined || built.status !== 0) {
  rmSync(work, { force: true });
  // An old binary would speak an old protocol: none at all is better (the engine checks the version too).
  rmSync(target, { force: true });
  const why = built.error !== undefined ? built.error.message : `exit ${built.status ?? built.signal}: ${built.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  process.stderr.write(`nodegraph: spawnd not built (${cc}: ${why}); the engine will spawn task commands itself\n`);
} else {
  if (built.stderr.trim() !== '') process.stderr.write(built.stderr);
  // Replaced whole: a run starting now finds the old binary or the new one, never half of one.
  renameSync(work, target);
}

// A checkout (the bundler script is there, which a package does not ship): its failure is the checkout's to see.
const bundler = path.join(root, 'scripts', 'bundle-deps.ts');
if (existsSync(bundler)) {
  const bundled = spawnSync(process.execPath, [bundler], { stdio: 'inherit' });
  process.exit(bundled.status ?? 1);
}
