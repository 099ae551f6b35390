// Absolute paths joined and compared as strings, without path.resolve's cost
// for the common case of a plain relative path.

import path from 'node:path';
import { flat } from './flat.ts';

/** A path with `.` or `..` segments, a doubled or a trailing slash: path.resolve must normalise it. */
export const needsNormalising = /(^|\/)\.\.?(\/|$)|\/\/|\/$/;

/** path.resolve(dir, p), for an absolute, normalised `dir`. */
export function join(dir: string, p: string): string {
  if (p.startsWith('/') || needsNormalising.test(p)) return path.resolve(dir, p);
  return flat(dir === '/' ? `/${p}` : `${dir}/${p}`);
}

/** Whether `folder` is `p` or a folder above it (both absolute and normalised). */
export function holds(folder: string, p: string): boolean {
  if (folder.length > p.length || !p.startsWith(folder)) return false;
  return folder.length === p.length || folder === '/' || p.charCodeAt(folder.length) === 47;
}

/**
 * The index in `sorted` (ascending, as Array.prototype.sort orders strings) of
 * the first path strictly inside `folder`, if any is: those inside a folder
 * sort together, right after its `folder/` prefix.
 */
export function firstInside(sorted: readonly string[], folder: string): number {
  const prefix = folder === '/' ? '/' : `${folder}/`;
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (sorted[mid]! < prefix) low = mid + 1;
    else high = mid;
  }
  // '/' itself sorts first and is not inside itself.
  return low < sorted.length && sorted[low] === '/' && folder === '/' ? low + 1 : low;
}

/**
 * Where the project was when a task last ran, if it is elsewhere now (moved, or copied
 * with its state): `then` is the task's folder as its record has it, `now` its folder
 * now, `dir` the project's folder now (a task's folder lies where its Nodefile puts it).
 */
export function projectThen(then: string, now: string, dir: string): string | undefined {
  if (then === now) return undefined;
  const before = path.resolve(then, path.relative(now, dir));
  return before === dir ? undefined : before;
}

/** `p` in the folder `from` put at the same place in `to`; a path outside `from` as it is. */
export function rebase(p: string, from: string, to: string): string {
  return holds(from, p) ? path.join(to, path.relative(from, p)) : p;
}
