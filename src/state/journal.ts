// The state journal: `<stateDir>/state.jsonl`, append-only, compacted now
// and then. "State is sacred": a crash, kill -9, Ctrl-C or a second run must
// never corrupt it or make the tool trust something it did not verify.
//
// Format (the framing is lines.ts; the header and a record's line journal-format.ts). One record per line, `<crc32 as 8 hex> <payload>\n`,
// where the CRC-32 (node:zlib) covers the payload's UTF-8 bytes. Line 1 is a
// header `{"format":"nodegraph-state","version":3}` in the same framing. A
// payload (record.ts, the line format) is a record's fixed fields, its id and
// the rest as JSON, which never contains a raw newline: a line is exactly one
// record. A load checks each line's checksum and framing and keeps where it
// lies (journal-decode.ts, records.ts); the JSON is parsed when the record is
// read whole. The writer (journal-writer.ts) appends and compacts.
//
// Appends. One writeSync() of the whole line on an fd opened O_APPEND, and no
// fsync per record:
//  - kill -9 / Ctrl-C / a crash of the process: a completed write() is in
//    the kernel page cache and survives the process, so every record whose
//    append returned is kept. An append interrupted mid-line leaves a torn
//    last line; its checksum fails, so it is dropped on load.
//  - Power loss / kernel crash: unsynced lines at the tail may be lost or
//    torn. Losing a record only makes the state older than reality, and an
//    older record can only make the planner re-run (or re-check) a task:
//    its fingerprint or its outputs no longer match what the record says.
//    That is safe. sync() (fsync) at the end of an apply bounds the loss.
//  - A record is only ever trusted if its checksum matches and it passes
//    validation. When a dropped line (torn or corrupt) can be attributed to
//    a task and is newer than that task's last good record, that record is
//    loaded as 'failed' ("distrusted"), because the task did run again and
//    the record no longer describes what was applied — so it re-runs.
//  - A record whose JSON turns out invalid when first read (only a writer's
//    bug can make one: its checksum matched) counts as never run.
//
// Torn tails. A torn last line has no newline. Before the first append the
// writer terminates it with a newline, so the next record starts on a fresh
// line instead of being glued to the garbage (which would corrupt both). The
// torn bytes are kept as a line of their own rather than truncated, since
// truncation could discard a complete record that only lost its newline; the
// run that found them compacts the journal when it ends (tidy), so a damaged
// line warns once and the verdict it led to is kept as a 'failed' record.
//
// Compaction rewrites the journal as one line per live task (each line's
// bytes as they were, but for records a load had to change) into a temp
// file, fsyncs it, renames it over the journal and fsyncs the directory.
// Until the rename the old file is untouched; after it the new file is
// complete (it was fsynced first). A crash at any point leaves one of the
// two, both valid; a leftover temp file is ignored by readers and removed by
// the next writer. Only the lock holder writes or compacts, so no other
// process holds an fd on the replaced file.

export {
  decodeJournal,
  readState,
  type DecodedJournal,
} from './journal-decode.ts';
export { encodeLine, JOURNAL_FILE, JOURNAL_FORMAT, JOURNAL_VERSION, journalPath } from './journal-format.ts';
export { defaultCompactWhen, openJournal, type JournalOptions, type JournalStore } from './journal-writer.ts';
export { bufferSource, fdSource, frame, type JournalSource } from './lines.ts';
export type { CompactionStats } from './types.ts';
