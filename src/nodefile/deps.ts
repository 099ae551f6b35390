// Packages of many modules, bundled one file each in a checkout.
//
// The node kit (src/node/, graphs/) runs from the checkout, and every run of
// its Nodefile imports zod (95 modules), yaml (72) and smol-toml. Node's
// loader takes a fraction of a millisecond per module: some 70 ms for the
// three, against some 15 ms for one file each. `npm ci` bundles them
// (scripts/bundle-deps.ts, run by the checkout's `install` script) into
// node_modules/.nodegraph/deps/, with a manifest naming the package.json each
// bundle was made from, and its size and mtime then.
//
// The Nodefile loader's resolve hook (load.ts) asks here first: an import of
// one of these packages by name, from a module of nodegraph's own (not below
// node_modules), gets the bundle, if the package is still the one it was made
// from. Anything else — no manifest (an installed package: it has no bundler script
// there), a package reinstalled since, a Nodefile's own import of zod — is
// resolved by Node as always, so a bundle is never older than what it stands for.

import { readFileSync, statSync } from 'node:fs';

/** The packages bundled (scripts/bundle-deps.ts makes exactly these). */
export const BUNDLED_PACKAGES: readonly string[] = ['zod', 'yaml', 'smol-toml'];

const bundled = new Set(BUNDLED_PACKAGES);

/** Where scripts/bundle-deps.ts writes, below a package root. */
export const DEPS_DIR = 'node_modules/.nodegraph/deps/';

interface ManifestEntry {
  readonly file: string;
  readonly packageJson: string;
  readonly mtimeMs: number;
  readonly size: number;
}

/** Per package root: package name → the URL of its bundle, for those still current. */
const current = new Map<string, ReadonlyMap<string, string>>();

/**
 * The URL of the bundle standing for `specifier` when a module of the package
 * at `root` (a file: URL ending in '/') imports it from `parent`; undefined
 * when Node should resolve it as always.
 */
export function bundledDependency(specifier: string, parent: string | undefined, root: string): string | undefined {
  if (!bundled.has(specifier) || parent === undefined || !parent.startsWith(root) || parent.includes('/node_modules/')) return undefined;
  let bundles = current.get(root);
  if (bundles === undefined) current.set(root, (bundles = readManifest(new URL(DEPS_DIR, root))));
  return bundles.get(specifier);
}

/** The bundles of the manifest in `dir` whose package is unchanged since; none when there is no valid manifest. */
function readManifest(dir: URL): ReadonlyMap<string, string> {
  const found = new Map<string, string>();
  let manifest: unknown;
  try {
    manifest = JSON.parse(readFileSync(new URL('manifest.json', dir), 'utf8'));
  } catch {
    return found;
  }
  if (typeof manifest !== 'object' || manifest === null) return found;
  for (const [name, value] of Object.entries(manifest as Record<string, unknown>)) {
    const entry = value as Partial<ManifestEntry> | null;
    if (!bundled.has(name) || typeof entry !== 'object' || entry === null) continue;
    const { file, packageJson, mtimeMs, size } = entry;
    if (typeof file !== 'string' || !/^[\w.-]+\.js$/.test(file) || typeof packageJson !== 'string') continue;
    try {
      const st = statSync(packageJson);
      const bundle = new URL(file, dir);
      if (st.mtimeMs === mtimeMs && st.size === size && statSync(bundle).isFile()) found.set(name, bundle.href);
    } catch {
      // the package or its bundle is gone: Node's own resolution decides
    }
  }
  return found;
}
