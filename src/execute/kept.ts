// What a removal of a task's output must leave in place (teardown.ts, and the
// executor's removal of outputs a task no longer declares).

import { holds, type OutputGuard } from '../graph/analyze.ts';
import type { TaskId } from '../ids.ts';

/**
 * Why `target` must stay, or undefined: it is guarded, or another task's
 * output, or a folder that holds one. With `inside`, also a file that lies in
 * one (see removeStale in executor.ts); a teardown removes such a file, as it
 * always did: a slot's rootfs goes, the layout folder it lies in stays.
 */
export function keptBecause(
  target: string,
  guard: OutputGuard | undefined,
  claimed: ReadonlyMap<string, TaskId>,
  inside = false,
): string | undefined {
  const refused = guard?.refusesRemoving(target);
  if (refused !== undefined) return refused;
  const owner = claimed.get(target);
  if (owner !== undefined) return `is now ${owner}'s output`;
  for (const [output, task] of claimed) {
    if (holds(target, output)) return `holds ${output}, ${task}'s output`;
    if (inside && holds(output, target)) return `lies in ${output}, ${task}'s output`;
  }
  return undefined;
}
