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
  /**
   * For a task with a successful record and sensitive inputs (env inputs and values
   * marked sensitive): each one's plain SHA-256, as records made before keyed digests
   * hold it, so such a record is re-keyed rather than run again (plan/decide.ts).
   * Held in memory only: never recorded nor shown.
   */
  readonly unkeyed?: ReadonlyMap<string, ContentHash>;
}
