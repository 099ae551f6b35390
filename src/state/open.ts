// The engine's one entry point to the state: lock (for commands that write),
// load, and a store to append to; close() syncs, closes and unlocks.

import { dirname, resolve } from 'node:path';
import { err, ok, type Result } from '../util/result.ts';
import type { StateDirUnwritable, StateError, StateUnreadable } from './errors.ts';
import { openJournal, readState } from './journal.ts';
import { acquire, type Lock, type Locked } from './lock.ts';
import { endedMessage } from './processes.ts';
import type { LoadedState, StateStore, StateWarning } from './store.ts';
import type { RecordTable } from './records.ts';

/** Each of these is assignable to the matching Failure variant in src/error.ts. */
export type OpenStateError = StateDirUnwritable | StateUnreadable | Locked;

export interface OpenState {
  /** The absolute state directory. */
  readonly dir: string;
  /** Task id → last record, as loaded; callers keep it current as they append. */
  readonly records: RecordTable;
  /** What the load recovered from, as messages for the user. */
  readonly warnings: readonly string[];
  /** The detailed warnings behind `warnings`. */
  readonly details: readonly StateWarning[];
  /**
   * Appends go to the journal. Opened without the lock, the store is
   * read-only and append() throws (a caller bug).
   */
  readonly store: StateStore;
  /** The held lock, when opened with `lock: true`. */
  readonly lock: Lock | undefined;
  /** Size of the journal as read, in bytes. */
  readonly bytes: number;
  /** Record lines the journal has now (after a compaction this load made, one per live task). */
  readonly lines: number;
  /**
   * At the end of a command that succeeded: compacts the journal if it needs it (StateStore.tidy);
   * a warning for the user when that failed (the journal is intact). Nothing without the lock.
   */
  tidy(): string | undefined;
  /** Syncs the journal, closes it and releases the lock. Idempotent. */
  close(): void;
}

export interface OpenStateOptions {
  /** Take the lock and open for writing (apply, destroy…); false for read-only commands (plan). */
  readonly lock: boolean;
  /** Recorded as the lock holder's command. */
  readonly command?: string;
  /** The lock, taken already. */
  readonly held?: Lock;
}

/** StateWriteFailed is not among the user-facing failures; it reads as an unwritable state dir. */
const asFailure = (e: StateError | Locked): OpenStateError =>
  e.reason === 'state-write-failed' ? { reason: 'state-dir-unwritable', path: dirname(e.path), code: e.code, message: e.detail } : e;

export function openState(stateDir: string, options: OpenStateOptions): Result<OpenState, OpenStateError> {
  if (!options.lock) {
    const loaded = readState(stateDir);
    if (!loaded.ok) return loaded;
    return ok(assemble(stateDir, loaded.value, readOnlyStore(loaded.value), undefined, []));
  }
  let taken = options.held;
  if (taken === undefined) {
    const lock = acquire(stateDir, options.command === undefined ? {} : { command: options.command });
    if (!lock.ok) return lock;
    taken = lock.value;
  }
  const journal = openJournal(taken);
  if (!journal.ok) {
    taken.release();
    return err(asFailure(journal.error));
  }
  const loaded = journal.value.load();
  if (!loaded.ok) {
    journal.value.close();
    taken.release();
    return err(asFailure(loaded.error));
  }
  return ok(assemble(taken.stateDir, loaded.value, journal.value, taken, lockWarnings(taken)));
}

/** What taking the lock had to clear away, as messages for the user. */
export function lockWarnings(taken: Lock): string[] {
  const extra: string[] = [];
  const from = taken.tookOverFrom;
  if (from !== undefined) {
    extra.push(`took over the state lock left by pid ${from.pid} (${from.command}, since ${from.startedAt}), which is no longer running`);
  }
  for (const run of taken.endedProcesses ?? []) extra.push(endedMessage(run));
  if (taken.removedTransaction !== undefined) {
    extra.push(`removed ${taken.removedTransaction}, the saved copies of an atomic apply that a killed run left without its transaction record`);
  }
  const torn = taken.removedUnreadable;
  if (torn !== undefined) {
    extra.push(`removed an unreadable state lock written at ${torn.writtenAt}, before this machine booted (${torn.message}: ${JSON.stringify(torn.content.slice(0, 80))})`);
  }
  return extra;
}

function assemble(dir: string, loaded: LoadedState, store: StateStore, lock: Lock | undefined, extra: string[]): OpenState {
  let closed = false;
  return {
    dir: lock?.stateDir ?? resolve(dir),
    records: loaded.records,
    bytes: loaded.stats.bytes,
    lines: loaded.stats.compacted ? loaded.stats.live : loaded.stats.lines,
    warnings: [...extra, ...loaded.warnings.map((w) => `state: ${w.message}`)],
    details: loaded.warnings,
    store,
    lock,
    tidy() {
      const tidied = store.tidy(loaded.records.size);
      return tidied.ok ? undefined : `state: compaction skipped: ${tidied.error.message}`;
    },
    close() {
      if (closed) return;
      closed = true;
      try {
        store.sync();
        store.close();
      } finally {
        loaded.records.close();
        lock?.release();
      }
    },
  };
}

function readOnlyStore(loaded: LoadedState): StateStore {
  return {
    load: () => ok(loaded),
    append() {
      throw new Error('the state was opened read-only (without the lock); it cannot be appended to');
    },
    sync: () => ok(undefined),
    tidy: () => ok(undefined),
    readBack: () => undefined,
    close() {},
  };
}

export { forceUnlock, liveHolder, lockPath } from './lock.ts';
