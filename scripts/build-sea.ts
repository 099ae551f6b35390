// `npm run build:sea`: nodegraph as one executable file for Linux x86-64, dist/nodegraph,
// that runs on a host with no Node.js (Node's single executable applications: a copy of
// the pinned Node with a blob injected by postject). It takes the arguments `npx nodegraph`
// takes. Inside it: scripts/sea-main.cjs (the entry), the CLI bundled with every
// dependency (lib/), zod, yaml and smol-toml one file each for a Nodefile's node kit
// (deps/, the files `npm ci` bundled), and spawnd compiled statically where the C library
// allows (else the one `npm ci` built; none without a C compiler: the engine then spawns
// task commands itself).
//
// dist/nodegraph.inputs records the digest of everything it was made from: with
// --if-stale nothing is rebuilt while that digest holds (the tests' cached build).
//
//   node scripts/build-sea.ts [--out FILE] [--if-stale]

import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { out: { type: 'string' }, 'if-stale': { type: 'boolean' } } });
const out = path.resolve(values.out ?? path.join(root, 'dist', 'nodegraph'));
const inputsFile = `${out}.inputs`;

/** Every file below `dir` (sorted), for the digest. */
const filesBelow = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .sort();

const deps = path.join(root, 'node_modules', '.nodegraph', 'deps');
const inputs = [...filesBelow(path.join(root, 'src')), path.join(root, 'native', 'spawnd.c'), path.join(root, 'package.json'), path.join(root, 'package-lock.json'), fileURLToPath(import.meta.url), path.join(root, 'scripts', 'sea-main.cjs')];
const digest = createHash('sha256');
for (const file of inputs) digest.update(`${path.relative(root, file)}\0`).update(readFileSync(file)).update('\0');
digest.update(process.version);
const inputsDigest = digest.digest('hex');
if (values['if-stale'] === true && existsSync(out) && existsSync(inputsFile) && readFileSync(inputsFile, 'utf8').trim() === inputsDigest) process.exit(0);

if (!existsSync(path.join(deps, 'manifest.json'))) throw new Error(`build-sea: ${path.relative(root, deps)} is missing: run npm ci (its install script bundles zod, yaml and smol-toml)`);

const work = mkdtempSync(path.join(tmpdir(), 'nodegraph-sea-'));
try {
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);

  // What the sources find from import.meta.url in a checkout or a package, the executable
  // has elsewhere: each rewrite must match exactly once, or the build fails.
  const rewrites: Record<string, [string, string][]> = {
    'src/execute/spawnd.ts': [["new URL('../../node_modules/.nodegraph/spawnd', import.meta.url)", "new URL(globalThis[Symbol.for('nodegraph.sea')].spawnd)"]],
    'src/cli/main.ts': [["readFileSync(new URL('../../package.json', import.meta.url), 'utf8')", JSON.stringify(JSON.stringify({ version: pkg.version }))]],
    // The CommonJS cache is one per process: any file names it.
  };
  const rewritten = new Set<string>();
  const seaPlaces = {
    name: 'sea-places',
    transform(code: string, id: string): string | undefined {
      const rel = path.relative(root, id);
      const list = rewrites[rel];
      if (list === undefined) return undefined;
      rewritten.add(rel);
      let result = code;
      for (const [from, to] of list) {
        if (result.split(from).length !== 2) throw new Error(`build-sea: ${rel} no longer has exactly one ${from}`);
        result = result.replace(from, to);
      }
      return result;
    },
  };
  const { build } = await import('rolldown');
  const lib = path.join(work, 'lib');
  await build({
    input: { main: path.join(root, 'src/cli/main.ts'), index: path.join(root, 'src/index.ts'), library: path.join(root, 'src/library.ts') },
    platform: 'node',
    // Everything but Node's own modules is inside: the host has no node_modules.
    external: (id) => builtins.has(id) || id.startsWith('node:'),
    logLevel: 'warn',
    plugins: [seaPlaces],
    // ASCII only and no doc comments, as scripts/build-dist.ts writes it.
    output: { dir: lib, format: 'esm', entryFileNames: '[name].js', chunkFileNames: '[name]-[hash].js', charset: 'ascii', comments: { jsdoc: false } },
  });
  // A file moved or renamed would leave its place unrewritten: the build says so rather than ship it.
  for (const rel of Object.keys(rewrites)) if (!rewritten.has(rel)) throw new Error(`build-sea: ${rel} was not bundled: where did its import.meta.url place go?`);

  const assets: Record<string, string> = {};
  for (const file of filesBelow(lib)) assets[`lib/${path.relative(lib, file)}`] = file;
  for (const name of ['zod', 'yaml', 'smol-toml']) assets[`deps/${name}.js`] = path.join(deps, `${name}.js`);

  // spawnd: static, so it runs whatever the host's C library; else dynamic (glibc, as Node itself needs).
  const spawnd = path.join(work, 'spawnd');
  const cc = process.env['CC'] ?? 'cc';
  const compiled = spawnSync(cc, ['-O2', '-std=c11', '-Wall', '-Wextra', '-static', '-o', spawnd, path.join(root, 'native', 'spawnd.c')], { encoding: 'utf8' });
  const installed = path.join(root, 'node_modules', '.nodegraph', 'spawnd');
  if (compiled.status !== 0 && existsSync(installed)) copyFileSync(installed, spawnd);
  if (existsSync(spawnd)) {
    assets['spawnd'] = spawnd;
    writeFileSync(`${spawnd}.sha256`, createHash('sha256').update(readFileSync(spawnd)).digest('hex').slice(0, 16));
    assets['spawnd.sha256'] = `${spawnd}.sha256`;
  } else process.stderr.write('build-sea: no spawnd (no C compiler): the executable spawns task commands itself\n');

  const blob = path.join(work, 'sea.blob');
  const config = path.join(work, 'sea-config.json');
  writeFileSync(
    config,
    JSON.stringify({
      main: path.join(root, 'scripts', 'sea-main.cjs'),
      output: blob,
      disableExperimentalSEAWarning: true,
      useSnapshot: false,
      // A code cache would stop the entry's import() of the bundle.
      useCodeCache: false,
      // bin/nodegraph.js's one start-up setting (BENCHMARKS.md, start-up settings).
      execArgv: ['--max-semi-space-size=1'],
      assets,
    }),
  );
  const node = process.execPath;
  const run = (file: string, args: string[]): void => {
    const ran = spawnSync(file, args, { encoding: 'utf8' });
    if (ran.error !== undefined || ran.status !== 0) throw new Error(`build-sea: ${path.basename(file)} ${args.join(' ')}: ${ran.error?.message ?? `exit ${ran.status}`}\n${ran.stderr}`);
  };
  run(node, ['--experimental-sea-config', config]);
  const exe = path.join(work, 'nodegraph');
  copyFileSync(node, exe);
  chmodSync(exe, 0o755);
  // Node's debug symbols are a sixth of its size and nothing a run uses.
  if (spawnSync('strip', [exe]).status !== 0) process.stderr.write('build-sea: strip failed or missing: the executable keeps its symbols\n');
  run(node, [path.join(root, 'node_modules', 'postject', 'dist', 'cli.js'), exe, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2']);
  mkdirSync(path.dirname(out), { recursive: true });
  // Replaced whole: a run starting meanwhile finds the old executable or the new one.
  const staged = `${out}.new-${process.pid}`;
  copyFileSync(exe, staged);
  chmodSync(staged, 0o755);
  renameSync(staged, out);
  writeFileSync(inputsFile, `${inputsDigest}\n`);
  process.stdout.write(`${path.relative(process.cwd(), out) || out}: ${(statSync(out).size / 2 ** 20).toFixed(1)} MiB\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
