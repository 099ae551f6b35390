// The text of a file input as it was applied and as it is now, for `plan
// --diff` and `explain`: the old text is the copy the generations keep
// (generations.ts), found by the SHA-256 the task's record names. Only small
// text: a file over TEXT_LIMIT, with a NUL byte or not UTF-8 has no diff.

import { readFileSync } from 'node:fs';
import type { TaskNode } from '../graph/graph.ts';
import { join } from '../util/paths.ts';
import { HASH_PREFIX } from '../ids.ts';
import type { TaskRecord } from '../state/record.ts';
import { GenerationStore } from './generations.ts';

/** The largest file, in bytes, whose change is shown line by line. */
export const TEXT_LIMIT = 64 * 1024;

export interface TextChange {
  readonly input: string;
  /** Absolute. */
  readonly path: string;
  readonly before: string;
  readonly after: string;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

function textOf(file: string): string | undefined {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch {
    return undefined;
  }
  if (bytes.length > TEXT_LIMIT || bytes.includes(0)) return undefined;
  try {
    return decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Each of `names` (file inputs of `node` that changed) whose applied text the store keeps, with its text now. */
export function textChanges(stateDir: string, dir: string, node: TaskNode, record: TaskRecord | undefined, names: readonly string[]): TextChange[] {
  if (record === undefined) return [];
  const store = new GenerationStore(stateDir);
  const changes: TextChange[] = [];
  for (const name of names) {
    const input = Object.hasOwn(node.inputs, name) ? node.inputs[name] : undefined;
    const recorded = Object.hasOwn(record.inputs, name) ? record.inputs[name] : undefined;
    if (input?.kind !== 'file' || recorded === undefined) continue;
    const file = join(dir, input.path);
    const before = textOf(store.object(recorded.slice(HASH_PREFIX)));
    const after = textOf(file);
    if (before !== undefined && after !== undefined && before !== after) changes.push({ input: name, path: file, before, after });
  }
  return changes;
}
