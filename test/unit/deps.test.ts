// Which imports get a bundled package (src/nodefile/deps.ts): only a bundled
// package's name, only from a module of the package root's own, and only while
// the installed package is the one the bundle was made from.

import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, expect, test } from 'vitest';
import { bundledDependency, DEPS_DIR } from '../../src/nodefile/deps.ts';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A package root with zod and yaml installed and bundled; `manifest` may replace the manifest's text. */
function root(manifest?: (entries: Record<string, object>) => string): { dir: string; url: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-deps-'));
  made.push(dir);
  const deps = path.join(dir, DEPS_DIR);
  mkdirSync(deps, { recursive: true });
  const entries: Record<string, object> = {};
  for (const name of ['zod', 'yaml']) {
    const packageJson = path.join(dir, 'node_modules', name, 'package.json');
    mkdirSync(path.dirname(packageJson), { recursive: true });
    writeFileSync(packageJson, `{"name":"${name}","version":"1.0.0"}`);
    writeFileSync(path.join(deps, `${name}.js`), 'export {};\n');
    const st = statSync(packageJson);
    entries[name] = { file: `${name}.js`, packageJson, mtimeMs: st.mtimeMs, size: st.size };
  }
  writeFileSync(path.join(deps, 'manifest.json'), manifest === undefined ? JSON.stringify(entries) : manifest(entries));
  return { dir, url: pathToFileURL(dir).href + '/' };
}

test('a bundled package imported by name from a module of the root gets its bundle', () => {
  const { dir, url } = root();
  const parent = `${url}src/node/yaml.ts`;
  expect(bundledDependency('yaml', parent, url)).toBe(pathToFileURL(path.join(dir, DEPS_DIR, 'yaml.js')).href);
  expect(bundledDependency('zod', `${url}graphs/node-config.ts`, url)).toBe(pathToFileURL(path.join(dir, DEPS_DIR, 'zod.js')).href);
});

test('anything else is left to Node: other names, subpaths, other importers, packages importing packages', () => {
  const { url } = root();
  const own = `${url}src/node/yaml.ts`;
  expect(bundledDependency('execa', own, url)).toBeUndefined();
  expect(bundledDependency('zod/mini', own, url)).toBeUndefined();
  expect(bundledDependency('smol-toml', own, url)).toBeUndefined(); // bundled by the script, but not in this manifest
  expect(bundledDependency('zod', 'file:///elsewhere/Nodefile.ts', url)).toBeUndefined();
  expect(bundledDependency('zod', `${url}node_modules/some-package/index.js`, url)).toBeUndefined();
  expect(bundledDependency('zod', undefined, url)).toBeUndefined();
});

test('a package installed again since its bundle was made is not bundled; the others still are', () => {
  const { dir, url } = root();
  writeFileSync(path.join(dir, 'node_modules', 'zod', 'package.json'), '{"name":"zod","version":"2.0.0"}');
  expect(bundledDependency('zod', `${url}src/a.ts`, url)).toBeUndefined();
  expect(bundledDependency('yaml', `${url}src/a.ts`, url)).toBeDefined();
});

test('a missing bundle, a bundle named outside its folder, or a manifest that is not one bundles nothing', () => {
  const gone = root();
  rmSync(path.join(gone.dir, DEPS_DIR, 'yaml.js'));
  expect(bundledDependency('yaml', `${gone.url}src/a.ts`, gone.url)).toBeUndefined();
  expect(bundledDependency('zod', `${gone.url}src/a.ts`, gone.url)).toBeDefined();

  const escaping = root((entries) => JSON.stringify({ ...entries, zod: { ...entries['zod'], file: '../../zod/index.js' } }));
  expect(bundledDependency('zod', `${escaping.url}src/a.ts`, escaping.url)).toBeUndefined();

  for (const text of ['', 'not json', 'null', '[]', '{"zod": 3}']) {
    const bad = root(() => text);
    expect(bundledDependency('zod', `${bad.url}src/a.ts`, bad.url)).toBeUndefined();
  }
});
