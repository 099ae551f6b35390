// Where a path really is, following every symlink on the way; undefined when
// it does not exist (or a link on the way dangles). For the places that must
// tell one file by two spellings: outputs about to be removed, the state
// folder, a file written through a link. And whether a path, links followed,
// is a folder.

import { realpathSync, statSync } from 'node:fs';

export function realPath(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}

/** Whether `p` is a folder, following links; false when it cannot be looked at. */
export function isFolder(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
