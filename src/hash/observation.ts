// What observing found of a task, in hashes: what the planner decides from.
// It lies here, below both observe (which makes it) and plan (which reads it).

import type { ContentHash } from '../ids.ts';

/** What was seen of a task before deciding: its inputs' and outputs' hashes, and its check. */
export interface TaskObservation {
  /** Input name → hash, for every input that is not another task's output. */
  readonly inputs: ReadonlyMap<string, ContentHash>;
  /** Absolute output path → hash, or 'missing'. */
  readonly outputs: ReadonlyMap<string, ContentHash | 'missing'>;
  /** Undefined when the task has no check or it was not run (no record to verify). */
  readonly check?: { readonly ok: boolean; readonly detail: string };
}
