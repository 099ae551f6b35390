// Preserved paths (`ng.preserve`): saved under the state folder before an
// atomic apply runs anything, and given back byte for byte on rollback —
// contents, modes, owners, symlinks, a folder as a tree, and a path that was
// absent as absent. Every saved file is synced before the manifest that names
// it, and the manifest before the apply starts.

import {
  chmodSync,
  copyFileSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  type Stats,
} from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { removePath } from '../util/mounts.ts';
import { fsyncFile, writeDurably } from '../util/durable.ts';
import { err, ok, type Result } from '../util/result.ts';

export interface SavedEntry {
  /** Relative to the preserved path; '' for the path itself. */
  readonly rel: string;
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  /** A symlink's target. */
  readonly target?: string;
}

export interface SavedPath {
  readonly path: string;
  /** Undefined: the path did not exist. */
  readonly entries?: readonly SavedEntry[];
}

export interface Preserved {
  readonly dir: string;
  readonly paths: readonly SavedPath[];
}

const MANIFEST = 'preserved.json';

/** Saves `paths` into `dir` (made anew). On any failure (a full disk) the partial copy is removed and nothing else changed. */
export function savePreserved(paths: readonly string[], dir: string): Result<Preserved, { readonly path: string; readonly message: string }> {
  rmSync(dir, { recursive: true, force: true });
  const saved: SavedPath[] = [];
  let at = '';
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    paths.forEach((p, i) => {
      at = p;
      const stat = lstatOrUndefined(p);
      if (stat === undefined) {
        saved.push({ path: p });
        return;
      }
      const entries: SavedEntry[] = [];
      copyTree(p, path.join(dir, String(i)), '', stat, entries);
      saved.push({ path: p, entries });
    });
    at = path.join(dir, MANIFEST);
    writeDurably(at, JSON.stringify({ paths: saved, sha256: digestOf(saved) }));
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    return err({ path: at, message: (error as Error).message });
  }
  return ok({ dir, paths: saved });
}

/**
 * The saved paths, or why they cannot be trusted: a rollback removes what a
 * preserved path did not hold when saved, so a damaged manifest (a path, or
 * entries, that are not what was saved) is refused, never acted on.
 */
export function readPreserved(dir: string): Result<Preserved, string> {
  const file = path.join(dir, MANIFEST);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return err(`are gone (${file} cannot be read)`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return err(`are damaged: ${file} is not JSON`);
  }
  const manifest = parsed as { paths?: unknown; sha256?: unknown };
  if (!Array.isArray(manifest.paths) || !manifest.paths.every(isSavedPath) || Object.keys(manifest).some((k) => k !== 'paths' && k !== 'sha256')) {
    return err(`are damaged: ${file} does not hold what was saved`);
  }
  // A manifest written before the digest was kept has only its shape checked.
  if (manifest.sha256 !== undefined && manifest.sha256 !== digestOf(manifest.paths)) return err(`are damaged: ${file} does not match its digest`);
  return ok({ dir, paths: manifest.paths });
}

const digestOf = (paths: readonly SavedPath[]): string => createHash('sha256').update(JSON.stringify(paths)).digest('hex');

const KINDS = new Set(['file', 'dir', 'symlink']);
const isId = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;

function isSavedPath(v: unknown): v is SavedPath {
  if (typeof v !== 'object' || v === null) return false;
  const saved = v as { path?: unknown; entries?: unknown };
  if (typeof saved.path !== 'string' || !path.isAbsolute(saved.path) || Object.keys(saved).some((k) => k !== 'path' && k !== 'entries')) return false;
  return saved.entries === undefined || (Array.isArray(saved.entries) && saved.entries.length > 0 && saved.entries.every(isSavedEntry));
}

function isSavedEntry(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  const e = v as Partial<Record<keyof SavedEntry, unknown>>;
  if (typeof e.rel !== 'string' || e.rel.startsWith('/') || e.rel.split('/').includes('..') || !KINDS.has(e.type as string)) return false;
  if (!isId(e.mode) || !isId(e.uid) || !isId(e.gid)) return false;
  return e.type === 'symlink' ? typeof e.target === 'string' : e.target === undefined;
}

function copyTree(source: string, copy: string, rel: string, stat: Stats, entries: SavedEntry[]): void {
  const entry = { rel, mode: stat.mode & 0o7777, uid: stat.uid, gid: stat.gid };
  if (stat.isSymbolicLink()) {
    entries.push({ ...entry, type: 'symlink', target: readlinkSync(source) });
  } else if (stat.isDirectory()) {
    entries.push({ ...entry, type: 'dir' });
    mkdirSync(copy, { recursive: true, mode: 0o700 });
    for (const name of readdirSync(source).sort()) {
      const child = path.join(source, name);
      copyTree(child, path.join(copy, name), rel === '' ? name : `${rel}/${name}`, lstatSync(child), entries);
    }
  } else if (stat.isFile()) {
    entries.push({ ...entry, type: 'file' });
    mkdirSync(path.dirname(copy), { recursive: true, mode: 0o700 });
    copyFileSync(source, copy);
    fsyncFile(copy);
  }
  // Sockets, fifos and devices are not content: left as they are.
}

/**
 * Makes each preserved path what it was when saved: what was added is
 * removed, what changed is put back, and what is equal is left alone (so a
 * mount point that stayed is not touched). Returns what could not be restored.
 */
export function restorePreserved(preserved: Preserved): string[] {
  const problems: string[] = [];
  preserved.paths.forEach((saved, i) => {
    try {
      if (saved.entries === undefined) {
        if (lstatOrUndefined(saved.path) !== undefined) {
          const problem = removePath(saved.path);
          if (problem !== undefined) problems.push(`${saved.path}: ${problem}`);
        }
        return;
      }
      restoreTree(saved.path, path.join(preserved.dir, String(i)), saved.entries, problems);
    } catch (error) {
      problems.push(`${saved.path}: ${(error as Error).message}`);
    }
  });
  return problems;
}

function restoreTree(root: string, copy: string, entries: readonly SavedEntry[], problems: string[]): void {
  const wanted = new Map(entries.map((e) => [e.rel, e]));
  mkdirSync(path.dirname(root), { recursive: true });
  // What is there now and was not saved goes, deepest first.
  for (const rel of walk(root).reverse()) {
    if (wanted.has(rel)) continue;
    const problem = removePath(rel === '' ? root : path.join(root, rel));
    if (problem !== undefined) problems.push(problem);
  }
  for (const entry of entries) {
    const target = entry.rel === '' ? root : path.join(root, entry.rel);
    const from = entry.rel === '' ? copy : path.join(copy, entry.rel);
    const now = lstatOrUndefined(target);
    if (now !== undefined && kindOf(now) !== entry.type) {
      const problem = removePath(target);
      if (problem !== undefined) {
        problems.push(problem);
        continue;
      }
    }
    const present = now !== undefined && kindOf(now) === entry.type;
    if (entry.type === 'dir') {
      if (!present) mkdirSync(target, { mode: 0o700 });
    } else if (entry.type === 'symlink') {
      if (!present || readlinkSync(target) !== entry.target) {
        rmSync(target, { force: true });
        symlinkSync(entry.target!, target);
      }
    } else if (!present || !readFileSync(target).equals(readFileSync(from))) {
      const temp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.restore`);
      copyFileSync(from, temp);
      renameSync(temp, target);
    }
    lchownSync(target, entry.uid, entry.gid);
  }
  // Modes last, folders deepest first: a folder saved read-only is filled before it is closed.
  for (const entry of [...entries].reverse()) {
    if (entry.type === 'symlink') continue;
    chmodSync(entry.rel === '' ? root : path.join(root, entry.rel), entry.mode);
  }
}

/** Relative paths below (and including) `root`, parents before children; [] when it does not exist. */
function walk(root: string): string[] {
  const stat = lstatOrUndefined(root);
  if (stat === undefined) return [];
  const found = [''];
  const visit = (dir: string, rel: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const child = path.join(dir, name);
      const childRel = rel === '' ? name : `${rel}/${name}`;
      found.push(childRel);
      if (lstatSync(child).isDirectory()) visit(child, childRel);
    }
  };
  if (stat.isDirectory()) visit(root, '');
  return found;
}

const kindOf = (stat: Stats): SavedEntry['type'] | 'other' =>
  stat.isSymbolicLink() ? 'symlink' : stat.isDirectory() ? 'dir' : stat.isFile() ? 'file' : 'other';

function lstatOrUndefined(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw error;
  }
}
