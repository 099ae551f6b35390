// The failures the state layer returns as values, and the small filesystem
// helpers they come from. Their shapes are assignable to the matching
// variants of Failure in src/error.ts ('state-dir-unwritable',
// 'state-unreadable', 'locked'); the extra fields only add detail.

import { existsSync, mkdirSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { err, ok, type Result } from '../util/result.ts';

/** The state directory (or a file in it) cannot be created or opened for writing. */
export interface StateDirUnwritable {
  readonly reason: 'state-dir-unwritable';
  /** The state folder, whichever file in it could not be written: the folder is what the user chose and can fix. */
  readonly path: string;
  /** The errno code, e.g. 'EACCES', 'ENOTDIR', 'EROFS'. */
  readonly code: string;
  /** Why, in a few words and without a path: `permission denied (EACCES)`. */
  readonly message: string;
}

/** The journal cannot be read, or is not one this version may read or write. */
export interface StateUnreadable {
  readonly reason: 'state-unreadable';
  readonly path: string;
  /**
   * 'newer-format': written by a newer nodegraph (refused, left untouched).
   * 'bad-header': the first line is corrupt or not a nodegraph journal.
   * 'io': the read itself failed.
   */
  readonly kind: 'newer-format' | 'bad-header' | 'io';
  readonly message: string;
  readonly code?: string;
  /** For 'newer-format': the version found and the newest this build reads. */
  readonly found?: number;
  readonly supported?: number;
}

/** Appending, syncing or compacting failed part-way (disk full, I/O error). */
export interface StateWriteFailed {
  readonly reason: 'state-write-failed';
  readonly path: string;
  readonly code: string;
  readonly message: string;
  /** Why, in a few words and without a path: `no space left on device (ENOSPC)`. */
  readonly detail: string;
}

export type StateError = StateDirUnwritable | StateUnreadable | StateWriteFailed;

export const errnoCode = (e: unknown): string =>
  typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : 'EUNKNOWN';

export const errnoMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * What a file written by a newer nodegraph says, the journal's and a generation's
 * alike: refused, and left as it is.
 */
export const newerFormatMessage = (path: string, what: string, found: number, supported: number): string =>
  `${path} was written by a newer nodegraph (${what} format ${found}; this version reads up to ${supported}); upgrade nodegraph — the file was left untouched`;

/** An errno failure in a few words, without the path Node's message names: `permission denied (EACCES)`. */
export function errnoWords(e: unknown): string {
  const text = errnoMessage(e);
  const m = /^([A-Z][A-Z0-9]+): ([^,]+)/.exec(text);
  return m === null ? text : `${m[2]} (${m[1]})`;
}

/** `path`, a file in the state folder (or, with `isDir`, the folder itself), could not be made or opened for writing. */
export const unwritable = (path: string, e: unknown, isDir = false): StateDirUnwritable => ({
  reason: 'state-dir-unwritable',
  path: isDir ? path : dirname(path),
  code: errnoCode(e),
  // The folder is the failure's path; the file in it is named here (a folder where the journal should be, say).
  message: isDir ? errnoWords(e) : `${basename(path)}: ${errnoWords(e)}`,
});

/** The journal at `path` could not be opened or read. */
export const readFailed = (path: string, e: unknown): StateUnreadable => ({
  reason: 'state-unreadable',
  path,
  kind: 'io',
  code: errnoCode(e),
  message: `cannot read ${path}: ${errnoMessage(e)}`,
});

export const writeFailed = (path: string, e: unknown): StateWriteFailed => ({
  reason: 'state-write-failed',
  path,
  code: errnoCode(e),
  message: `cannot write state to ${path}: ${errnoMessage(e)}`,
  detail: `${basename(path)}: ${errnoWords(e)}`,
});

/** mkdir -p, with failure as a value. */
export function ensureStateDir(dir: string): Result<void, StateDirUnwritable> {
  try {
    makeDirs(dir);
    return ok(undefined);
  } catch (e) {
    return err(unwritable(dir, e, true));
  }
}

/**
 * mkdir -p, one level at a time: Node's recursive mkdirSync loops for ever, deaf
 * to Ctrl-C, where mkdir says ENOENT of a parent that exists (below /proc).
 */
function makeDirs(dir: string): void {
  const missing: string[] = [];
  for (let d = dir; !existsSync(d); d = dirname(d)) missing.push(d);
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
  // What stood in the way and was taken for there (a symlink loop, a file) is named as the folder's failure.
  if (!statSync(dir).isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${dir}'`), { code: 'ENOTDIR' });
}

export { fsyncDir } from '../util/fsync.ts';
