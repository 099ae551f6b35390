// The hash of the files a glob matches: which ones (sorted relative paths)
// and their content. A glob that matches nothing has a hash too.

import { globSync } from 'node:fs';
import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { HashCache } from './cache.ts';
import { hashParts } from './value.ts';

export function hashGlob(pattern: string, base: string, cache: HashCache): { hash: ContentHash; files: string[] } {
  const files = globSync(pattern, { cwd: base }).map((f) => f.split(path.sep).join('/')).sort();
  const parts: string[] = [];
  const matched: string[] = [];
  for (const file of files) {
    const seen = cache.hashFile(path.resolve(base, file));
    if (seen.kind !== 'file') continue;
    matched.push(file);
    parts.push(file, seen.hash);
  }
  return { hash: hashParts(parts), files: matched };
}
