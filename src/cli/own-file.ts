// A file a command writes besides the state (a saved plan, a metrics file) is
// written only where it cannot cost anything: not in the state folder, not over
// the Nodefile, and not over an existing file that is not one it wrote itself.

import { closeSync, lstatSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import { holds } from '../util/paths.ts';
import { isFolder, realPath } from '../util/realpath.ts';

export interface OwnFile {
  /** What the command writes, for the message: `a saved plan`. */
  readonly what: string;
  /** How a file the command wrote begins; an existing file that begins otherwise is not overwritten. */
  readonly begins: string;
  readonly stateDir: string;
  readonly nodefile: string;
}

/** Why `file` must not be written as `own`, or undefined when it may. */
export function refusalToWrite(file: string, own: OwnFile): string | undefined {
  let stats;
  try {
    stats = lstatSync(file);
  } catch {
    // Not there yet: only where it would go is checked.
  }
  if (stats?.isDirectory() === true) return `${file} is a folder`;
  if (stats === undefined && !isFolder(path.dirname(file))) return `its folder ${path.dirname(file)} does not exist`;
  const real = realOf(file);
  if (holds(realOf(own.stateDir), real)) return `${file} is inside nodegraph's state folder ${own.stateDir}`;
  if (real === realOf(own.nodefile)) return `${file} is the Nodefile`;
  if (stats?.isFile() === true && stats.size > 0 && !beginsWith(file, own.begins)) {
    return `${file} exists and is not ${own.what} nodegraph wrote: remove it, or choose another path`;
  }
  return undefined;
}

/** `p` with its folder's symlinks resolved (the file itself may not exist yet). */
function realOf(p: string): string {
  const absolute = path.resolve(p);
  const dir = path.dirname(absolute);
  return realPath(absolute) ?? (dir === absolute ? absolute : path.join(realOf(dir), path.basename(absolute)));
}

/** Whether `file` can be read and begins with `head`. */
export function beginsWith(file: string, head: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return false;
  }
  try {
    const buffer = Buffer.alloc(Buffer.byteLength(head));
    return readSync(fd, buffer, 0, buffer.length, 0) === buffer.length && buffer.toString('utf8') === head;
  } finally {
    closeSync(fd);
  }
}
