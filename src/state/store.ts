// The state store: what the engine reads at the start of a run and appends to
// as tasks finish. The real one is the journal (journal.ts); the in-memory
// one here is for unit tests of other modules and behaves the same way
// (validation on append, replay on load, last record per id wins).

import type { TaskId } from '../ids.ts';
import { ok, type Result } from '../util/result.ts';
import type { StateError } from './errors.ts';
import { encodePayload, headText, isTombstone, validForAppend, type StoredRecord } from './record.ts';
import { RecordTable } from './records.ts';
import type { CompactionStats } from './journal.ts';

export { openJournal, readState } from './journal.ts';

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

export interface LoadedState {
  /** Task id → its last record; destroyed tasks are absent. */
  readonly records: RecordTable;
  readonly warnings: StateWarning[];
  readonly stats: LoadStats;
}

/**
 * A writable store. Obtained only with the state lock held (see openJournal).
 * `append` throws for a record that fails validation: that is a bug in the
 * caller, not a state failure.
 */
export interface StateStore {
  /** Replays the store: last record per id wins, tombstones delete. */
  load(): Result<LoadedState, StateError>;
  /**
   * Records one task's run (or a tombstone). Not durable until sync(). Says
   * where the record's text lies, for `readBack`, when the store knows.
   * `scrub`: the lines it supersedes hold what must not stay on disk (the plain
   * hash of a secret), so tidy() compacts them away at the end of the run.
   */
  append(record: StoredRecord, scrub?: boolean): Result<Appended | undefined, StateError>;
  /**
   * The text of a record this store appended, read back from where `append`
   * said it lies; undefined when it is not there intact (its checksum is
   * checked again). Lets a run keep only where a record went, not the record
   * (state/records.ts, RecordMap.setWritten).
   */
  readBack(where: Appended): string | undefined;
  /** Makes everything appended so far durable (fsync; none when nothing was written since the last). Call at the end of an apply. */
  sync(): Result<void, StateError>;
  /**
   * At the end of a run that wrote: compacts the journal if its last load
   * dropped a line, found an older format, an append asked to scrub, or it has grown past `live` tasks'
   * worth (JournalOptions.compactWhen); undefined when it did not need to.
   */
  tidy(live: number): Result<CompactionStats | undefined, StateError>;
  close(): void;
}

/** Where an appended record's line payload lies: its first byte and its length, in bytes. */
export interface Appended {
  readonly at: number;
  readonly bytes: number;
  /** For a record (not a tombstone): its fixed fields as written (record.ts, headText). */
  readonly head?: string;
}

export const emptyLoad = (): LoadedState => ({
  records: new RecordTable(),
  warnings: [],
  stats: { lines: 0, dropped: 0, live: 0, bytes: 0, compacted: false },
});

/** An in-memory store for tests: same validation and replay, no files. */
export interface MemoryStore extends StateStore {
  /** Everything appended, in order (validated copies). */
  readonly appended: readonly StoredRecord[];
  /** How many times sync() was called. */
  readonly syncs: number;
  readonly closed: boolean;
}

export function memoryStore(initial: Iterable<StoredRecord> = []): MemoryStore {
  const log: StoredRecord[] = [...initial].map(validForAppend);
  const appended: StoredRecord[] = [];
  // What append returned the place of: the texts, by the place.
  const texts: string[] = [];
  let syncs = 0;
  let closed = false;
  const guard = (): void => {
    if (closed) throw new Error('state store used after close()');
  };
  return {
    get appended() {
      return appended;
    },
    get syncs() {
      return syncs;
    },
    get closed() {
      return closed;
    },
    load() {
      guard();
      const records = new RecordTable();
      for (const r of log) {
        if (isTombstone(r)) records.delete(r.id);
        else records.set(structuredClone(r));
      }
      return ok({
        records,
        warnings: [],
        stats: { lines: log.length, dropped: 0, live: records.size, bytes: 0, compacted: false },
      });
    },
    append(record) {
      guard();
      const valid = validForAppend(record);
      log.push(valid);
      appended.push(valid);
      // Its line's payload, as the journal writes it.
      const text = encodePayload(valid);
      texts.push(text);
      return ok({ at: texts.length - 1, bytes: text.length, ...(isTombstone(valid) ? {} : { head: headText(valid) }) });
    },
    readBack: ({ at, bytes }) => (texts[at]?.length === bytes ? texts[at] : undefined),
    sync() {
      guard();
      syncs++;
      return ok(undefined);
    },
    tidy: () => ok(undefined),
    close() {
      closed = true;
    },
  };
}

export type { StateError };
