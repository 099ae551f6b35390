// The hash of a directory tree: every entry's relative path, its type, the
// executable bit and content of files (through the cache), and the target of
// symlinks (not followed). Empty directories count.

import { lstatSync, readdirSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { HashCache } from './cache.ts';
import { hashParts } from './value.ts';

export function hashTree(root: string, cache: HashCache): ContentHash {
  const parts: string[] = [];
  walk(root, '', cache, parts);
  return hashParts(parts);
}

function walk(dir: string, rel: string, cache: HashCache, parts: string[]): void {
  const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    const name = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) {
      parts.push(`d ${name}`);
      walk(full, name, cache, parts);
    } else if (entry.isSymbolicLink()) {
      parts.push(`l ${name} ${readlinkSync(full)}`);
    } else if (entry.isFile()) {
      const seen = cache.hashFile(full);
      if (seen.kind === 'file') parts.push(`f ${name} ${seen.mode & 0o111 ? 'x' : '-'} ${seen.hash}`);
      else parts.push(`? ${name}`); // vanished while we looked
    } else {
      // Sockets, fifos, devices: their presence and kind, not their content.
      parts.push(`o ${name} ${lstatSync(full).mode & 0o170000}`);
    }
  }
}
