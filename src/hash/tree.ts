// The hash of a directory tree: every entry's path relative to the root ('/'
// separators), its type, and for files the executable bit and the content hash
// (through the cache, or a look of large.ts: one stat per unchanged file, no
// read); for symlinks the target text (links are not followed); empty
// directories count. Entries are visited depth-first with names sorted by UTF-16
// code unit, so the order, and the hash, depend only on the tree.
//
// Entries that vanish while the tree is walked are left out. A root that is not
// there, or is not a directory, hashes to its own digest, distinct from any tree.
// A name that is not UTF-8 is refused (names.ts); a link's target that is not is
// hashed as its bytes.

import { readdirSync, readlinkSync, type Dirent } from 'node:fs';
import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { HashCache } from './cache.ts';
import { lookThrough, type Look } from './large.ts';
import { refuseNotUtf8 } from './names.ts';
import { hashParts } from './value.ts';

export type TreeEntry =
  | { readonly path: string; readonly type: 'file'; readonly executable: boolean; readonly hash: ContentHash }
  | { readonly path: string; readonly type: 'directory' }
  | { readonly path: string; readonly type: 'symlink'; readonly target: string }
  /** A socket, fifo or device: its presence counts, not its content. */
  | { readonly path: string; readonly type: 'other' };

export interface TreeHash {
  readonly hash: ContentHash;
  /** 'ok', or why the root could not be listed. */
  readonly root: 'ok' | 'missing' | 'not-a-directory';
  readonly entries: readonly TreeEntry[];
}

const HEADER = 'nodegraph-tree 1';

const byName = (a: Dirent, b: Dirent): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

const code = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code;

/** The hash of the tree under `root` (see the top of this file). */
export function hashTree(root: string, files: HashCache | Look): ContentHash {
  return walk(root, lookThrough(files), undefined).hash;
}

/** The tree's hash together with the entries it was computed from, in order. */
export function walkTree(root: string, files: HashCache | Look): TreeHash {
  return walk(root, lookThrough(files), []);
}

function walk(root: string, look: Look, entries: TreeEntry[] | undefined): TreeHash {
  const base = path.resolve(root);
  const parts: string[] = [HEADER];
  let rootError: 'missing' | 'not-a-directory' = 'missing';
  const list = (dir: string): Dirent[] | undefined => {
    try {
      return readdirSync(dir, { withFileTypes: true }).sort(byName);
    } catch (error) {
      if (code(error) === 'ENOENT') return undefined;
      if (code(error) === 'ENOTDIR') {
        rootError = 'not-a-directory';
        return undefined;
      }
      throw error;
    }
  };
  const directory = (full: string, rel: string): void => {
    const inner = list(full);
    if (inner === undefined) return; // vanished
    entries?.push({ path: rel, type: 'directory' });
    parts.push('d', rel);
    visit(full, `${rel}/`, inner);
  };
  const visit = (dir: string, prefix: string, children: Dirent[]): void => {
    for (const child of children) {
      refuseNotUtf8(dir, child.name);
      const full = `${dir}${path.sep}${child.name}`;
      const rel = `${prefix}${child.name}`;
      if (child.isFile()) {
        const seen = look(full);
        if (seen === undefined) continue; // left unread: this walk's hash is thrown away
        if (seen.kind === 'file') {
          const executable = (seen.mode & 0o111) !== 0;
          entries?.push({ path: rel, type: 'file', executable, hash: seen.hash });
          parts.push('f', rel, executable ? 'x' : '-', seen.hash);
        } else if (seen.kind === 'directory') {
          directory(full, rel); // replaced by a directory since the listing
        } else if (seen.kind === 'other') {
          entries?.push({ path: rel, type: 'other' });
          parts.push('o', rel);
        } // 'missing': vanished
      } else if (child.isDirectory()) {
        directory(full, rel);
      } else if (child.isSymbolicLink()) {
        let raw: Buffer;
        try {
          raw = readlinkSync(full, { encoding: 'buffer' });
        } catch (error) {
          if (code(error) === 'ENOENT' || code(error) === 'EINVAL') continue; // vanished or replaced
          throw error;
        }
        const target = raw.toString('utf8');
        entries?.push({ path: rel, type: 'symlink', target });
        // Two targets that are not UTF-8 may read as one string: such a target counts by its bytes.
        if (target.includes('\uFFFD') && !Buffer.from(target).equals(raw)) parts.push('L', rel, raw.toString('hex'));
        else parts.push('l', rel, target);
      } else {
        entries?.push({ path: rel, type: 'other' });
        parts.push('o', rel);
      }
    }
  };
  const top = list(base);
  if (top === undefined) return { hash: hashParts([HEADER, rootError]), root: rootError, entries: entries ?? [] };
  visit(base, '', top);
  return { hash: hashParts(parts), root: 'ok', entries: entries ?? [] };
}
