// The hash of the files a glob matches (node:fs globSync): which files — their
// paths as matched, relative to the base, '/' separators, sorted — with each
// one's executable bit and content hash (through the cache, or a look of
// large.ts). Only files count (symlinks are followed to see if they are one);
// matched directories add nothing, so `src/**` hashes the files under src.
// Dotfiles match only where the pattern names a dot, as globSync does. A glob
// that matches no file hashes to EMPTY_GLOB_HASH. A match whose name is not
// UTF-8 is refused (names.ts), and so is a folder so named that the walk passes:
// globSync cannot list what lies below it.

import { globSync, type Dirent } from 'node:fs';
import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { HashCache } from './cache.ts';
import { lookThrough, type Look } from './large.ts';
import { refuseNotUtf8 } from './names.ts';
import { hashParts } from './value.ts';

export interface GlobHash {
  readonly hash: ContentHash;
  /** The matched files, as matched (relative to the base unless the pattern was absolute), sorted. */
  readonly files: readonly string[];
}

const HEADER = 'nodegraph-glob 1';

/** The hash of a glob that matches no file. */
export const EMPTY_GLOB_HASH: ContentHash = hashParts([HEADER]);

export function hashGlob(pattern: string | readonly string[], base: string, files: HashCache | Look): GlobHash {
  const look = lookThrough(files);
  const cwd = path.resolve(base);
  // Only a name listed with U+FFFD can be one that is not UTF-8: then the walk is looked at again.
  let mangled = false;
  const note = (name: string): boolean => {
    if (name.includes('\uFFFD')) mangled = true;
    return false;
  };
  const matched = globSync(pattern, { cwd, exclude: note });
  if (mangled) refuseMangledFolders(pattern, cwd);
  const unique = [...new Set(path.sep === '/' ? matched : matched.map((m) => m.split(path.sep).join('/')))].sort((a, b) =>
    a < b ? -1 : a > b ? 1 : 0,
  );
  const parts: string[] = [HEADER];
  const matches: string[] = [];
  for (const file of unique) {
    // Undefined: left unread, and this hash thrown away.
    const seen = look(path.resolve(cwd, file));
    if (seen?.kind === 'missing') refuseMangled(cwd, file);
    if (seen?.kind !== 'file') continue;
    matches.push(file);
    parts.push(file, (seen.mode & 0o111) !== 0 ? 'x' : '-', seen.hash);
  }
  return { hash: hashParts(parts), files: matches };
}

/** Throws NameNotUtf8 for a folder the glob's walk passes whose name is not UTF-8. */
function refuseMangledFolders(pattern: string | readonly string[], cwd: string): void {
  const folders: Dirent[] = [];
  const passed = (entry: Dirent): boolean => {
    if (entry.name.includes('\uFFFD') && entry.isDirectory()) folders.push(entry);
    return false;
  };
  globSync(pattern, { cwd, withFileTypes: true, exclude: passed });
  for (const folder of folders) refuseNotUtf8(path.resolve(cwd, folder.parentPath), folder.name);
}

/** Throws NameNotUtf8 when a folder or the file of `file`, as globSync spelled it, is named in bytes that are not UTF-8. */
function refuseMangled(cwd: string, file: string): void {
  if (!file.includes('\uFFFD')) return;
  let dir = path.isAbsolute(file) ? '/' : cwd;
  for (const name of file.split('/')) {
    if (name === '') continue;
    refuseNotUtf8(dir, name);
    dir = path.join(dir, name);
  }
}
