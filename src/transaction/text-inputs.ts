// The text of a file input as it was applied and as it is now, for `plan
// --diff` and `explain`: the old text is the copy the generations keep
// (generations.ts: an object, or inline in a part), found by the SHA-256 the task's record names. Only small
// text: a file over TEXT_LIMIT, with a NUL byte or not UTF-8 has no diff.

import { readFileSync } from 'node:fs';
import type { TaskNode } from '../graph/graph.ts';
import { join } from '../util/paths.ts';
import { HASH_PREFIX } from '../ids.ts';
import type { TaskRecord } from '../state/record.ts';
import type { GenerationStore } from './generations.ts';

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

function fileText(file: string): string | undefined {
  try {
    return textOf(readFileSync(file));
  } catch {
    return undefined;
  }
}

function textOf(bytes: Buffer | undefined): string | undefined {
  if (bytes === undefined || bytes.length > TEXT_LIMIT || bytes.includes(0)) return undefined;
  try {
    return decoder.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Each of `names` (file inputs of `node` that changed) whose applied text the store keeps, with its text now. */
export function textChanges(store: StoredContent, dir: string, node: TaskNode, record: TaskRecord | undefined, names: readonly string[]): TextChange[] {
  if (record === undefined) return [];
  const changes: TextChange[] = [];
  for (const name of names) {
    const input = Object.hasOwn(node.inputs, name) ? node.inputs[name] : undefined;
    const recorded = Object.hasOwn(record.inputs, name) ? record.inputs[name] : undefined;
    if (input?.kind !== 'file' || recorded === undefined) continue;
    const file = join(dir, input.path);
    const before = textOf(store.get(recorded.slice(HASH_PREFIX)));
    const after = fileText(file);
    if (before !== undefined && after !== undefined && before !== after) changes.push({ input: name, path: file, before, after });
  }
  return changes;
}

/** Content the generation store keeps, by SHA-256: an object of its own, or a file kept inline in a kept generation's part. */
export class StoredContent {
  readonly #store: GenerationStore;
  /** Inline content (base64) by SHA-256, from every kept generation's parts, read once when first asked. */
  #inline: Map<string, string> | undefined;

  constructor(store: GenerationStore) {
    this.#store = store;
  }

  get(sha256: string): Buffer | undefined {
    try {
      return readFileSync(this.#store.object(sha256));
    } catch {
      // not an object of its own
    }
    this.#inline ??= this.#readInline();
    const content = this.#inline.get(sha256);
    return content === undefined ? undefined : Buffer.from(content, 'base64');
  }

  #readInline(): Map<string, string> {
    const inline = new Map<string, string>();
    const read = new Set<string>();
    for (const n of this.#store.numbers()) {
      const stored = this.#store.head(n);
      for (const file of stored?.files ?? []) if (file.content !== undefined) inline.set(file.sha256, file.content);
      for (const part of stored?.parts ?? []) {
        // Kept generations share most parts: each is read once.
        if (read.has(part.sha256)) continue;
        read.add(part.sha256);
        for (const file of this.#store.part(part) ?? []) if (file.content !== undefined) inline.set(file.sha256, file.content);
      }
    }
    return inline;
  }
}
