// The durable record of what was applied, and the lock that keeps it to one writer.

export {
  RECORD_VERSION,
  canonical,
  checkRecord,
  isTombstone,
  validForAppend,
  type RecordCheck,
  type StoredRecord,
  type TaskRecord,
  type TaskTombstone,
  outputsDigest,
} from './record.ts';
export { RecordTable, type Records } from './records.ts';
export {
  JOURNAL_FILE,
  JOURNAL_FORMAT,
  JOURNAL_VERSION,
  decodeJournal,
  defaultCompactWhen,
  encodeLine,
  frame,
  journalPath,
  openJournal,
  readState,
  type CompactionStats,
  type DecodedJournal,
  type JournalOptions,
  type JournalStore,
} from './journal.ts';
export {
  emptyLoad,
  memoryStore,
  type Appended,
  type LoadedState,
  type LoadStats,
  type MemoryStore,
  type StateStore,
  type StateWarning,
  type StateWarningKind,
} from './store.ts';
export {
  acquire,
  breakLock,
  forceUnlock,
  lockPath,
  readLock,
  type AcquireOptions,
  type ForceUnlockOutcome,
  type Lock,
  type LockError,
  type LockHolder,
  type LockInfo,
  type Locked,
  type ReleaseOutcome,
} from './lock.ts';
export {
  ensureStateDir,
  type StateDirUnwritable,
  type StateError,
  type StateUnreadable,
  type StateWriteFailed,
} from './errors.ts';
export { openState, type OpenState, type OpenStateError, type OpenStateOptions } from './open.ts';
