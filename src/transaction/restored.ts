// What restoring a generation's sources found and changed (generations.ts, restore).

import { lstatSync } from 'node:fs';
import path from 'node:path';
import { sha256FileSync } from '../hash/file.ts';
import { HASH_PREFIX } from '../ids.ts';

/** The SHA-256 of a regular file at `file`; '' for anything else. */
export function currentSha256(file: string): string {
  try {
    return lstatSync(file).isFile() ? sha256FileSync(file).hash.slice(HASH_PREFIX) : '';
  } catch {
    return '';
  }
}

export function sameContent(file: string, sha256: string): boolean {
  try {
    if (!lstatSync(file).isFile()) return false;
    return sha256FileSync(file).hash.slice(HASH_PREFIX) === sha256;
  } catch {
    return false;
  }
}

/** What restoring a generation's sources changed: files written back, files it did not have removed. */
export interface Restored {
  readonly written: readonly string[];
  readonly removed: readonly string[];
}

/** `restored a, b; removed c`, paths relative to `base`; '' when nothing changed. */
export function describeRestored(r: Restored, base: string): string {
  const rel = (ps: readonly string[]): string => ps.map((p) => path.relative(base, p) || p).join(', ');
  const parts = [...(r.written.length > 0 ? [`restored ${rel(r.written)}`] : []), ...(r.removed.length > 0 ? [`removed ${rel(r.removed)}`] : [])];
  return parts.join('; ');
}
