// What a removal of a task's output must leave in place (teardown.ts, and the
// executor's removal of outputs a task no longer declares).

import path from 'node:path';
import type { OutputGuard } from '../graph/analyze.ts';
import type { TaskId } from '../ids.ts';
import { firstInside, holds } from '../util/paths.ts';

/**
 * The outputs other tasks declare, with their tasks, indexed for the two
 * questions a removal asks of each path: does it hold one of them (a folder
 * above one), and does it lie in one. Asked by walking every output, they
 * made a run that removes many paths quadratic: a copied 50,000-task project,
 * whose every task removes its old outputs, took 261 s against 78 s.
 */
export class Claimed {
  readonly #owners: ReadonlyMap<string, TaskId>;
  /** The outputs in code-unit order: those inside a folder are one run of it, from `folder/`. */
  #sorted: string[] | undefined;

  constructor(owners: ReadonlyMap<string, TaskId>) {
    this.#owners = owners;
  }

  /** The task whose output `p` is. */
  owner(p: string): TaskId | undefined {
    return this.#owners.get(p);
  }

  /** An output strictly inside the folder `folder` (absolute, normalised), with its task. */
  inside(folder: string): [string, TaskId] | undefined {
    const sorted = (this.#sorted ??= [...this.#owners.keys()].sort());
    const lo = firstInside(sorted, folder);
    const found = sorted[lo];
    return found !== undefined && holds(folder, found) && found !== folder ? [found, this.#owners.get(found)!] : undefined;
  }

  /** An output that is a folder above `p` (absolute, normalised), with its task. */
  around(p: string): [string, TaskId] | undefined {
    if (p === '/') return undefined;
    for (let dir = path.dirname(p); ; dir = path.dirname(dir)) {
      const task = this.#owners.get(dir);
      if (task !== undefined) return [dir, task];
      if (dir === '/' || dir === '.' || dir === path.dirname(dir)) return undefined;
    }
  }
}

/**
 * Why `target` must stay, or undefined: it is guarded, or another task's
 * output, or a folder that holds one. With `inside`, also a file that lies in
 * one (see removeStale in run-task.ts); a teardown removes such a file, as it
 * always did: a slot's rootfs goes, the layout folder it lies in stays.
 */
export function keptBecause(target: string, guard: OutputGuard | undefined, claimed: Claimed, inside = false): string | undefined {
  const refused = guard?.refusesRemoving(target);
  if (refused !== undefined) return refused;
  const owner = claimed.owner(target);
  if (owner !== undefined) return `is now ${owner}'s output`;
  const held = claimed.inside(target);
  if (held !== undefined) return `holds ${held[0]}, ${held[1]}'s output`;
  const around = inside ? claimed.around(target) : undefined;
  if (around !== undefined) return `lies in ${around[0]}, ${around[1]}'s output`;
  return undefined;
}
