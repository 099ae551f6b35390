// The state store: what the engine reads at the start of a run and appends to
// as tasks finish. The real one is the journal (journal.ts); the in-memory
// one here is for unit tests of other modules and behaves the same way
// (validation on append, replay on load, last record per id wins).

import { ok, type Result } from '../util/result.ts';
import type { StateError } from './errors.ts';
import { encodePayload, headText, isTombstone, validForAppend, type StoredRecord } from './record.ts';
import { RecordTable } from './records.ts';
import type { Appended, CompactionStats, LoadStats, StateWarning } from './types.ts';

export type { Appended, CompactionStats, LoadStats, StateWarning, StateWarningKind } from './types.ts';

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
        if (isTombstone(r)) records.tombstone(r.id);
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
