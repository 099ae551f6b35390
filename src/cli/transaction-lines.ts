// What status, plan and generations say of a transaction they find without the lock.

import path from 'node:path';
import type { GenerationView } from '../operations.ts';

/** An atomic apply whose run holds the lock, as status and plan say it. */
export function underWayLine(t: NonNullable<GenerationView['underWay']>): string {
  const from = t.from === null ? 'no generation' : `generation ${t.from}`;
  const h = t.holder;
  return `an atomic apply from ${from} to ${t.to} is under way (${t.phase}, begun ${t.startedAt}), by pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}`;
}

/** A transaction folder without its record, as status and plan say it. */
export function orphanLine(dir: string, cwd: string): string {
  return `${path.relative(cwd, dir) || dir} holds the saved copies of an atomic apply that a killed run left without its transaction record: the next apply removes it`;
}
