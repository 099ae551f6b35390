// The state layer's plain types, shared by the journal, its records and the
// stores: kept apart so that none of those modules imports another for a type.

import type { TaskId } from '../ids.ts';

export type StateWarningKind =
  /** The journal's first line was cut off (no records lost: none can precede it). */
  | 'torn-header'
  /** The journal file is there but empty: a new journal has its header at once, so it was emptied. */
  | 'empty-journal'
  /** The last line was cut off mid-write (crash or power loss while appending). */
  | 'torn-line'
  /** A line whose checksum or framing does not match: corrupted on disk. */
  | 'corrupt-line'
  /** A line with a good checksum that is not a valid record of this format. */
  | 'invalid-record'
  /**
   * A dropped line belonged (as far as can be told) to this task and was
   * newer than its last good record, so that record no longer describes
   * what was applied: it is loaded with status 'failed' so the task re-runs.
   */
  | 'distrusted'
  /** Compaction failed; the journal is untouched and still valid. */
  | 'compaction-failed';

/** Something a load noticed and recovered from. Returned, never printed or thrown. */
export interface StateWarning {
  readonly kind: StateWarningKind;
  readonly message: string;
  /** 1-based line in the journal file (line 1 is the header). */
  readonly line?: number;
  readonly id?: TaskId;
}

export interface LoadStats {
  /** Record lines in the journal (good and dropped; the header not counted). */
  readonly lines: number;
  readonly dropped: number;
  /** Live tasks after replay. */
  readonly live: number;
  readonly bytes: number;
  /** Whether this load compacted the journal. */
  readonly compacted: boolean;
}

/** Where an appended record's line payload lies: its first byte and its length, in bytes. */
export interface Appended {
  readonly at: number;
  readonly bytes: number;
  /** For a record (not a tombstone): its fixed fields as written (record.ts, headText). */
  readonly head?: string;
}

export interface CompactionStats {
  readonly linesBefore: number;
  readonly live: number;
  readonly bytesBefore: number;
  readonly bytesAfter: number;
}
