// Hashes a task's declared outputs: a file by content, a directory as a tree.

import type { ContentHash } from '../ids.ts';
import type { HashCache } from '../hash/cache.ts';
import { hashAsync, lookThrough, type Look } from '../hash/large.ts';
import { hashTree } from '../hash/tree.ts';
import { unreachable } from '../util/unreachable.ts';

/** The outputs' hashes, a large file read off the main thread; on `signal` given up (its reason thrown). */
export function observeOutputs(outputs: readonly string[], cache: HashCache, signal: AbortSignal): Promise<Map<string, ContentHash | 'missing'>> {
  return hashAsync(cache, signal, (look) => {
    const seen = new Map<string, ContentHash | 'missing'>();
    for (const output of outputs) seen.set(output, observePath(output, look));
    return seen;
  });
}

/** A file left unread by `files` (a look of large.ts) is 'missing' here, in a whole that is thrown away. */
export function observePath(file: string, files: HashCache | Look): ContentHash | 'missing' {
  const look = lookThrough(files);
  const observation = look(file);
  switch (observation?.kind) {
    case 'file':
      return observation.hash;
    case 'directory':
      return hashTree(file, look);
    case 'missing':
    case 'other':
    case undefined:
      return 'missing';
  }
  return unreachable(observation);
}
