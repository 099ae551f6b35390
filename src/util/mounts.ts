// What is mounted where, from /proc/self/mountinfo: removing a tree that has
// a mount below it would take the mounted files with it.

import { readFileSync } from 'node:fs';
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
