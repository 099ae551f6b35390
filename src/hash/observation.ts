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

/**
 * What an observing pass read of the file inputs and env inputs of the tasks it
 * observed: a whole-graph apply keeps these as its generation's sources
 * (transaction/manifest.ts) without looking at any of them again.
 */
export interface ObservedSources {
  /**
   * Calls `visit` with each file input's absolute path once, in the order the pass
   * looked (the tasks' order, each task's inputs in their order), and the hash it
   * saw; undefined where it only stat'ed the file (observe's unrecordedInputs 'look').
   */
  forEachFile(visit: (path: string, hash: ContentHash | undefined) => void): void;
  /** The names of the env inputs. */
  readonly envNames: ReadonlySet<string>;
}
