// Hashes a task's declared outputs: a file by content, a directory as a tree.

import type { ContentHash } from '../ids.ts';
import type { HashCache } from '../hash/cache.ts';
import { hashTree } from '../hash/tree.ts';
import { unreachable } from '../util/unreachable.ts';

export function observeOutputs(outputs: readonly string[], cache: HashCache): Map<string, ContentHash | 'missing'> {
  const seen = new Map<string, ContentHash | 'missing'>();
  for (const output of outputs) seen.set(output, observePath(output, cache));
  return seen;
}

export function observePath(file: string, cache: HashCache): ContentHash | 'missing' {
  const observation = cache.hashFile(file);
  switch (observation.kind) {
    case 'file':
      return observation.hash;
    case 'directory':
      return hashTree(file, cache);
    case 'missing':
      return 'missing';
    case 'other':
      return 'missing';
  }
  return unreachable(observation);
}
