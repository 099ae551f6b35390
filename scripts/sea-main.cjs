// The entry of the single executable (scripts/build-sea.ts injects it into a copy of
// Node). Node runs it as CommonJS; the CLI is an ES module bundle carried as an asset.
//
// Modules carried inside have file: URLs below the executable's own path, as if it were a
// folder (`file:///usr/local/bin/nodegraph/lib/main.js`): no file on disk is there, and what
// the sources make of import.meta.url (createRequire, nodegraph's own files) still holds.
// They are the bundle (lib/), and one file each for the packages the node kit imports (deps/). A Nodefile and the files it
// imports are read from disk as always (Node strips their types); an import of zod, yaml,
// smol-toml or nodegraph that Node cannot find there (no node_modules on the host) gets
// the copy carried inside.
//
// spawnd is carried inside too, written once per build (named by its digest) to
// $XDG_CACHE_HOME/nodegraph or ~/.cache/nodegraph, since a program must be a file to run.
// Where that cannot be written, the engine spawns task commands itself, as without spawnd.
'use strict';

const { enableCompileCache, registerHooks } = require('node:module');
const sea = require('node:sea');
const { chmodSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const ROOT = `${pathToFileURL(process.execPath).href}/`;
/** A package by name → its asset, used only when Node finds no such package itself. */
const PACKAGES = { nodegraph: 'lib/index.js', 'nodegraph/library': 'lib/library.js', zod: 'deps/zod.js', yaml: 'deps/yaml.js', 'smol-toml': 'deps/smol-toml.js' };
const carried = (url) => ({ url, format: 'module', shortCircuit: true });

registerHooks({
  resolve(specifier, context, next) {
    const parent = context.parentURL;
    if (specifier.startsWith(ROOT)) return carried(specifier);
    // The bundle's own chunks, relative to the chunk importing them.
    if (parent !== undefined && parent.startsWith(ROOT) && /^\.\.?\//.test(specifier)) return carried(new URL(specifier, parent).href);
    const asset = Object.hasOwn(PACKAGES, specifier) ? PACKAGES[specifier] : undefined;
    if (asset === undefined) return next(specifier, context);
    try {
      return next(specifier, context);
    } catch (error) {
      if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
      return carried(ROOT + asset);
    }
  },
  load(url, context, next) {
    if (!url.startsWith(ROOT)) return next(url, context);
    return { format: 'module', source: sea.getAsset(url.slice(ROOT.length), 'utf8'), shortCircuit: true };
  },
});

/** Where spawnd is (a file: URL): written there unless it already is; a missing file means "spawn directly". */
function placeSpawnd() {
  const keys = sea.getAssetKeys();
  const cache = path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'nodegraph');
  if (!keys.includes('spawnd')) return pathToFileURL(path.join(cache, 'spawnd-none')).href;
  const digest = sea.getAsset('spawnd.sha256', 'utf8').trim();
  const file = path.join(cache, `spawnd-${digest}`);
  const bytes = new Uint8Array(sea.getRawAsset('spawnd'));
  try {
    if (statSync(file).size === bytes.length) return pathToFileURL(file).href;
  } catch {
    // not written yet
  }
  const work = `${file}.new-${process.pid}`;
  try {
    mkdirSync(cache, { recursive: true, mode: 0o700 });
    writeFileSync(work, bytes, { mode: 0o755 });
    chmodSync(work, 0o755);
    // Whole or not at all: a concurrent run finds the old state or the complete file.
    renameSync(work, file);
  } catch {
    try {
      rmSync(work, { force: true });
    } catch {
      // nothing was written: the folder itself could not be made
    }
  }
  return pathToFileURL(file).href;
}

globalThis[Symbol.for('nodegraph.sea')] = { spawnd: placeSpawnd() };
// V8's code cache for the Nodefile and its modules, as bin/nodegraph.js enables it.
enableCompileCache?.();
import(`${ROOT}lib/main.js`).then((cli) => cli.runCli());
