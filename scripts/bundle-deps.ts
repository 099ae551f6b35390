// `npm ci` and `npm install` run this in a checkout (from the `install` script,
// scripts/build-spawnd.mjs; the package does not ship it): each package
// that nodegraph's own modules import and that is made of many files — zod's
// 95 modules, yaml's 72 — is bundled into one file under
// node_modules/.nodegraph/deps/, with a manifest saying which installed
// package.json it was made from.
//
// The node kit (src/node/, graphs/) runs from the checkout, and its Nodefile
// imports zod, yaml and smol-toml on every run: loading them from their
// packages took some 70 ms, one file at a time, against some 15 ms bundled.
// The Nodefile loader (src/nodefile/deps.ts, which names the packages) resolves an import of one of these
// from a module of nodegraph's own to its bundle, when the manifest matches the
// package as installed now; otherwise Node resolves it as always.
//
//   node scripts/bundle-deps.ts

import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUNDLED_PACKAGES, DEPS_DIR } from '../src/nodefile/deps.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = path.join(root, DEPS_DIR);
const work = path.join(root, 'node_modules', '.nodegraph', `deps.new-${process.pid}`);

// npm runs `prepare` before packing too; an installed package has no use for these bundles.
if (process.env['npm_command'] === 'pack' || process.env['npm_command'] === 'publish') process.exit(0);

// Without the dev dependencies (npm ci --omit=dev) there is no bundler: the kit then loads the
// packages as they are, only slower. An install must not fail for it.
let build: typeof import('rolldown').build;
try {
  ({ build } = await import('rolldown'));
} catch {
  process.stderr.write('nodegraph: rolldown is not installed (dev dependencies omitted?): zod, yaml and smol-toml stay unbundled\n');
  process.exit(0);
}
mkdirSync(work, { recursive: true });
try {
  const manifest: Record<string, { file: string; packageJson: string; mtimeMs: number; size: number }> = {};
  for (const name of BUNDLED_PACKAGES) {
    // Where Node finds it from nodegraph's own modules: the checkout's node_modules.
    const packageJson = path.join(root, 'node_modules', name, 'package.json');
    const api = (await import(name)) as Record<string, unknown>;
    // The bundle exports, by name, what Node's import of the package gives (a CommonJS
    // package's too, for which `export *` would give nothing), its default included.
    const names = Object.keys(api).filter((n) => /^[A-Za-z_$][\w$]*$/.test(n));
    const entry = path.join(work, `${name}.entry.mjs`);
    writeFileSync(entry, `export { ${names.join(', ')} } from '${name}';\n`);
    await build({
      input: entry,
      platform: 'node',
      external: (id) => id.startsWith('node:'),
      logLevel: 'warn',
      output: { file: path.join(work, `${name}.js`), format: 'esm', codeSplitting: false },
    });
    rmSync(entry);
    const st = statSync(packageJson);
    manifest[name] = { file: `${name}.js`, packageJson, mtimeMs: st.mtimeMs, size: st.size };
  }
  writeFileSync(path.join(work, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  // The folder is replaced whole: a loader never sees a manifest without its bundles.
  rmSync(dir, { recursive: true, force: true });
  try {
    renameSync(work, dir);
  } catch (error) {
    // Another run of this script put its folder there first: the same bundles.
    if ((error as NodeJS.ErrnoException).code !== 'ENOTEMPTY' && (error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
