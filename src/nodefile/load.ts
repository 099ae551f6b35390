// Reads a Nodefile: imports it (Node strips its types), calls its default
// export with a Builder, and turns every way that can go wrong into a Failure.

import { createHash } from 'node:crypto';
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Failure } from '../error.ts';
import { err, ok, type Result } from '../util/result.ts';
import { nearest } from '../util/nearest.ts';
import { bundledDependency } from './deps.ts';
import { Builder, type Declarations } from './builder.ts';
import { builtinRequested, NO_READS, recordReads, type EvaluationReads } from './reads.ts';
import { captureSiteFromError } from './site.ts';
import type { SourceSite } from './types.ts';

let generation = 0;

/** Nodefile URLs (without the query that makes watch see edits), always loaded as ES modules. */
const nodefiles = new Set<string>();
/**
 * The modules Nodefiles import from their own files (not packages under
 * node_modules, not nodegraph's own), by URL without the query. `watch` watches
 * them, and a reload imports them afresh with the Nodefile.
 */
const localModules = new Set<string>();
/** nodegraph's own package (a checkout or an installed copy): its modules are loaded once, never reloaded. */
const OWN = new URL('../../', import.meta.url).href;
let hooked = false;
/** The names Node loads by their extension: a Nodefile named otherwise is read as TypeScript. */
const MODULE_EXTENSION = /\.(?:[cm]?[jt]s|json|node|wasm)$/;

const withoutQuery = (url: string): string => {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
};

/**
 * A Nodefile is an ES module (its default export declares the graph) wherever it
 * lies, and so is a `.ts` module it imports from its own files. Node would
 * otherwise read a `.ts` file as CommonJS below a package.json that says
 * `"type": "commonjs"`, which `npm init -y` writes: a fresh project that installs
 * nodegraph could not load its Nodefile, nor a `lib.ts` beside it ("does not
 * provide an export named …"). A CommonJS helper says so by its name, `.cts`.
 */
function loadAsModule(url: string): void {
  nodefiles.add(url);
  if (hooked) return;
  hooked = true;
  module.registerHooks({
    // A module a Nodefile (or one of its local modules) imports from a file of
    // its own is noted, and takes its importer's query: a reloaded Nodefile
    // (`?g=N`) runs the current text of every file it is made of, not the first.
    resolve(specifier, context, next) {
      // node:fs/promises and node:child_process are patched (reads.ts) before an evaluation sees them.
      if (module.isBuiltin(specifier)) builtinRequested(specifier);
      // zod, yaml, smol-toml for the node kit: one file each rather than dozens (deps.ts).
      const bundle = bundledDependency(specifier, context.parentURL, OWN);
      if (bundle !== undefined) return { url: bundle, format: 'module', shortCircuit: true };
      const resolved = next(specifier, context);
      const parent = context.parentURL;
      if (parent === undefined || !resolved.url.startsWith('file:') || resolved.url.includes('?')) return resolved;
      const plainParent = withoutQuery(parent);
      if (!nodefiles.has(plainParent) && !localModules.has(plainParent)) return resolved;
      if (resolved.url.includes('/node_modules/') || resolved.url.startsWith(OWN)) return resolved;
      localModules.add(resolved.url);
      return parent.length === plainParent.length ? resolved : { ...resolved, url: resolved.url + parent.slice(plainParent.length) };
    },
    load(target, context, next) {
      const plain = withoutQuery(target);
      const ours = nodefiles.has(plain) || localModules.has(plain);
      // A Nodefile named without a module's extension (`-f Nodefile`) is TypeScript too: Node would refuse its name.
      const typescript = ours && (plain.endsWith('.ts') || (nodefiles.has(plain) && !MODULE_EXTENSION.test(plain)));
      const loaded = typescript ? next(target, { ...context, format: 'module-typescript' }) : next(target, context);
      const source = loaded.source;
      if (ours && source !== undefined && source !== null) {
        evaluated.set(fileURLToPath(plain), createHash('sha256').update(typeof source === 'string' ? source : new Uint8Array(source as ArrayBuffer)).digest('hex'));
      }
      return loaded;
    },
  });
}

/**
 * The hex SHA-256 of each Nodefile and local module, by path, as Node last
 * loaded it to evaluate: a generation stores these bytes or refuses (the file
 * changed since), never a later edit of the file in their place.
 */
const evaluated = new Map<string, string>();

/** What the last evaluation ran of `file` (a Nodefile or one of its modules), by its SHA-256; undefined when it was not one. */
export function evaluatedSha256(file: string): string | undefined {
  return evaluated.get(file);
}

/** The files of the modules Nodefiles loaded so far import from their own folders (see localModules). */
export function nodefileModules(): string[] {
  return [...localModules].map((url) => fileURLToPath(url));
}

let lastReads: EvaluationReads = NO_READS;

/** What the last evaluation of a Nodefile read besides its modules (reads.ts), whether or not it loaded. */
export function nodefileReads(): EvaluationReads {
  return lastReads;
}

/** Files of nodegraph's own package: what it reads is not the user's source, wherever the Nodefile lies. */
const OWN_FILES = ['src/', 'native/', 'bin/', 'dist/', 'scripts/', 'node_modules/', 'package.json'].map((p) => fileURLToPath(new URL(p, OWN)));

/**
 * Which reads are the evaluation's own sources: not the Nodefiles and their
 * modules (a generation holds them already), not a package's files (below
 * node_modules) or nodegraph's own, not the state folder.
 */
function userSource(stateDir: string): (p: string) => boolean {
  const under = (dir: string, p: string): boolean => p === dir || p.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
  return (p) => {
    if (p.includes('/node_modules/') || under(stateDir, p) || OWN_FILES.some((own) => under(own, p))) return false;
    const url = pathToFileURL(p).href;
    return !nodefiles.has(url) && !localModules.has(url);
  };
}

/** Why `file` is no Nodefile to load: it is not there (with the one nearest it), or it is a folder. */
export function nodefileMissing(file: string): Failure | undefined {
  const given = path.resolve(file);
  if (!existsSync(given)) {
    const suggestion = nodefileNear(given);
    return { reason: 'nodefile-not-found', path: given, ...(suggestion === undefined ? {} : { suggestion }) };
  }
  return statSync(given).isDirectory() ? { reason: 'nodefile-not-found', path: given, folder: true } : undefined;
}

/**
 * Loads the Nodefile, recording what its evaluation reads (nodefileReads);
 * reads below `stateDir` (`.nodegraph` beside it by default) are nodegraph's own.
 */
export async function loadNodefile(file: string, options: { sites?: boolean; stateDir?: string } = {}): Promise<Result<Declarations, Failure[]>> {
  const given = path.resolve(file);
  const missing = nodefileMissing(given);
  if (missing !== undefined) return err([missing]);
  // The graph's paths start from where the Nodefile really is, however -f spells it
  // (a symlinked folder, a home reached through a link): one file, one path. Recorded
  // under another spelling, an output would look missing, and one run would remove
  // what the other had just written as no longer its output. Node imports the real
  // file too, so its stack frames (sites) name this path.
  const absolute = realpathSync(given);
  const stateDir = options.stateDir ?? path.join(path.dirname(absolute), '.nodegraph');
  const { value, reads } = await recordReads(() => evaluate(absolute, options), userSource(path.resolve(stateDir)));
  lastReads = reads;
  return value;
}

/** Imports the Nodefile and calls its default export: the evaluation whose reads are recorded. */
async function evaluate(absolute: string, options: { sites?: boolean }): Promise<Result<Declarations, Failure[]>> {
  let nodefile: { default?: unknown };
  try {
    // A fresh query string makes `watch` see edits; the first load keeps the plain URL.
    const plain = pathToFileURL(absolute).href;
    loadAsModule(plain);
    const url = plain + (generation++ === 0 ? '' : `?g=${generation}`);
    // CommonJS modules are kept by file name, whatever the query: forget them so they run again.
    if (generation > 1) {
      const cache = module.createRequire(import.meta.url).cache;
      for (const local of localModules) delete cache[fileURLToPath(local)];
    }
    nodefile = (await import(url)) as { default?: unknown };
  } catch (error) {
    return err([classifyImportError(absolute, error)]);
  }
  if (typeof nodefile.default !== 'function') {
    const found = nodefile.default === undefined ? undefined : nodefile.default === null ? 'null' : Array.isArray(nodefile.default) ? 'an array' : `${/^[aeiou]/.test(typeof nodefile.default) ? 'an' : 'a'} ${typeof nodefile.default}`;
    return err([{ reason: 'nodefile-no-default', path: absolute, ...(found === undefined ? {} : { found }) }]);
  }

  const builder = new Builder(absolute, path.dirname(absolute), options);
  try {
    await (nodefile.default as (api: unknown) => unknown)(builder.api());
  } catch (error) {
    return err([threw(absolute, error)]);
  } finally {
    builder.seal();
  }
  await builder.check();
  const declarations = builder.declarations();
  return declarations.failures.length > 0 ? err([...declarations.failures]) : ok(declarations);
}

function classifyImportError(file: string, error: unknown): Failure {
  const code = (error as { code?: unknown } | null)?.code;
  if (
    error instanceof SyntaxError ||
    code === 'ERR_INVALID_TYPESCRIPT_SYNTAX' ||
    code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX'
  ) {
    return { reason: 'nodefile-syntax', path: file, message: firstLine(error), site: syntaxSite(error) };
  }
  return threw(file, error);
}

function threw(file: string, error: unknown): Failure {
  return {
    reason: 'nodefile-threw',
    path: file,
    message: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    site: error instanceof Error ? captureSiteFromError(error, file) : undefined,
  };
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.trim();
}

/** Node puts `file:line`, the source line and a caret above a syntax error's stack. */
function syntaxSite(error: unknown): SourceSite | undefined {
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  // A path, or a file: URL when the Nodefile went through the load hook above.
  const match = /^((?:file:\/\/)?\/[^\n]*?):(\d+)\n/.exec(stack);
  if (match === null) return undefined;
  const caret = stack.split('\n').find((l) => /^\s*\^+\s*$/.test(l));
  const file = match[1]!.startsWith('file:') ? fileURLToPath(match[1]!) : match[1]!;
  return { file, line: Number(match[2]), column: caret === undefined ? 1 : caret.indexOf('^') + 1 };
}

/** A Nodefile that lies beside the missing `file`, to suggest: the nearest name, else the first `Nodefile*` one. */
function nodefileNear(file: string): string | undefined {
  let names: string[];
  try {
    // Not the file itself: a dangling symlink by that name is listed, and does not exist.
    names = readdirSync(path.dirname(file)).filter((n) => /\.(?:[cm]?ts|[cm]?js)$/.test(n) && n !== path.basename(file)).sort();
  } catch {
    return undefined;
  }
  const name = nearest(path.basename(file), names) ?? names.find((n) => /^nodefile/i.test(n));
  return name === undefined ? undefined : path.join(path.dirname(file), name);
}
