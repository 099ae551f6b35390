// What is mounted where, from /proc/self/mountinfo, and removal that respects
// it: removing a tree that has a mount below it would take the mounted files
// with it. Teardown and the node kit remove through removePath.

import { lstatSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import path from 'node:path';

export function parseMountPoints(mountinfo: string): string[] {
  const points: string[] = [];
  for (const line of mountinfo.split('\n')) {
    const field = line.split(' ')[4];
    if (field === undefined) continue;
    points.push(field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8))));
  }
  return points;
}

/** Mount points at or below `dir`, deepest first. */
export function mountsBelow(dir: string, mountinfo?: string): string[] {
  let table = mountinfo;
  if (table === undefined) {
    try {
      table = readFileSync('/proc/self/mountinfo', 'utf8');
    } catch {
      return [];
    }
  }
  const prefix = path.resolve(dir);
  return parseMountPoints(table)
    .filter((p) => p === prefix || p.startsWith(`${prefix}/`))
    .sort((a, b) => b.length - a.length);
}

/**
 * Removes a file or tree, refusing to descend into a mount point (a bind mount
 * would take the host's files with it). Only a folder can have mounts below
 * it; a file mounted on is refused by unlink itself (EBUSY), so a file costs
 * no read of the mount table.
 */
export function removePath(target: string): string | undefined {
  let folder: boolean;
  try {
    const stat = lstatSync(target, { throwIfNoEntry: false });
    if (stat === undefined) return undefined;
    folder = stat.isDirectory();
  } catch (error) {
    return `could not remove ${target}: ${(error as Error).message}`;
  }
  const refused = (): string | undefined => {
    const mounts = mountsBelow(target);
    return mounts.length > 0 ? `not removing ${target}: mounted below it: ${mounts.join(', ')}` : undefined;
  };
  if (folder) {
    const mounted = refused();
    if (mounted !== undefined) return mounted;
  }
  try {
    if (folder) rmSync(target, { recursive: true, force: true });
    else unlinkSync(target);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    return (code === 'EBUSY' ? refused() : undefined) ?? `could not remove ${target}: ${(error as Error).message}`;
  }
}
