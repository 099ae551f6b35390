// The journal's writer: appends, syncs and compactions by the lock holder
// (journal.ts states what each guarantees).

import { closeSync, constants, fchmodSync, fstatSync, fsyncSync, ftruncateSync, openSync, readdirSync, readSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import { ensureStateDir, errnoCode, fsyncDir, unwritable, writeFailed, type StateError } from './errors.ts';
import { decodeFile, noJournal, toLoaded, type DecodedJournal } from './journal-decode.ts';
import { checkHeader, encodeLine, headerLine, JOURNAL_FILE, JOURNAL_VERSION, replaceableHeader } from './journal-format.ts';
import { FRAMING_BYTES, NEWLINE, PAYLOAD_AT, verifiedPayload } from './lines.ts';
import { HEAD_LENGTH, isTombstone, type StoredRecord } from './record.ts';
import type { RecordTable } from './records.ts';
import { readLock, type Lock, type Locked } from './lock.ts';
import type { LoadedState, StateStore } from './store.ts';
import type { Appended, CompactionStats } from './types.ts';

const NEWLINE_BYTE = Buffer.of(NEWLINE);
const COMPACT_TMP_PREFIX = `${JOURNAL_FILE}.compact-`;
/** The owner's alone: records keep a task's `env` as given, for its destroy and stop commands. */
const JOURNAL_MODE = 0o600;
/** How much of the file's start prepare() reads to find the header line. */
const HEADER_READ_BYTES = 4096;

export interface JournalOptions {
  /** When tidy() compacts, besides after a load that dropped lines. Default: more than 2 × live + 1000 lines. */
  readonly compactWhen?: (stats: { readonly lines: number; readonly live: number }) => boolean;
  /**
   * Test hook for crash injection: called after the temp file is written and
   * fsynced ('written') and after it was renamed over the journal ('renamed').
   */
  readonly onCompactStep?: (step: 'written' | 'renamed', tempPath: string) => void;
}

export interface JournalStore extends StateStore {
  readonly path: string;
  /** Rewrites the journal as one line per live task. */
  compact(): Result<CompactionStats, StateError>;
}

export const defaultCompactWhen = ({ lines, live }: { lines: number; live: number }): boolean => lines > 2 * live + 1000;

function writeAll(fd: number, buf: Buffer): void {
  let off = 0;
  // A regular-file write is normally complete in one call; a short write
  // (disk filling up, a signal) continues where it stopped.
  while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
}

function readAt(fd: number, position: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  const n = readSync(fd, buf, 0, length, position);
  return buf.subarray(0, n);
}

/**
 * Makes an existing or new journal ready for appends: writes the header of a
 * new (or empty, or torn-header) file, refuses a journal of another format,
 * and terminates a torn last line. Returns err without writing anything when
 * the journal must not be touched.
 */
function prepare(fd: number, path: string, dir: string): Result<{ readonly synced: boolean; readonly version: number }, StateError> {
  try {
    const size = fstatSync(fd).size;
    if (size === 0) {
      writeAll(fd, headerLine());
      fsyncSync(fd);
      fsyncDir(dir);
      return ok({ synced: true, version: JOURNAL_VERSION });
    }
    const head = readAt(fd, 0, Math.min(size, HEADER_READ_BYTES));
    const nl = head.indexOf(NEWLINE);
    if (nl === -1) {
      if (size > head.length) return err({ reason: 'state-unreadable', path, kind: 'bad-header', message: `${path} does not start with a nodegraph journal header; it was left untouched` });
      const header = checkHeader(head, 0, head.length, path);
      if (!header.ok && !replaceableHeader(header, head)) return err(header.error);
      let version = JOURNAL_VERSION;
      if (header.ok) {
        writeAll(fd, NEWLINE_BYTE); // a complete header that only lost its newline
        version = header.version;
      } else {
        // A torn header: no record can follow a header that was never
        // completed, so starting over loses nothing.
        ftruncateSync(fd, 0);
        writeAll(fd, headerLine());
      }
      fsyncSync(fd);
      return ok({ synced: true, version });
    }
    const header = checkHeader(head, 0, nl, path);
    if (!header.ok) return err(header.error);
    const last = readAt(fd, size - 1, 1);
    if (last[0] === NEWLINE) return ok({ synced: true, version: header.version });
    writeAll(fd, NEWLINE_BYTE); // see "Torn tails" in journal.ts
    return ok({ synced: false, version: header.version });
  } catch (e) {
    return err(writeFailed(path, e));
  }
}

function sweepCompactionTemps(dir: string): void {
  try {
    for (const name of readdirSync(dir)) {
      if (name.startsWith(COMPACT_TMP_PREFIX) && name.endsWith('.tmp')) unlinkSync(join(dir, name));
    }
  } catch {
    // housekeeping only: readers ignore these files
  }
}

/**
 * Opens the journal for writing. Requires the state lock: only its holder
 * may append or compact. Creates the state directory if needed, and refuses a
 * journal written by a newer format. A missing journal is made by the first
 * record appended: a run that records nothing (a first apply that failed or
 * was interrupted) leaves no journal, which would read as no journal anyway.
 */
export function openJournal(lock: Lock, options: JournalOptions = {}): Result<JournalStore, StateError | Locked> {
  const dir = lock.stateDir;
  const path = join(dir, JOURNAL_FILE);
  if (!lock.isHeld()) {
    const now = readLock(dir);
    return err(now.ok && now.value !== undefined ? now.value : { reason: 'locked', path: lock.path, holder: undefined, otherHost: false });
  }
  const made = ensureStateDir(dir);
  if (!made.ok) return made;
  // We hold the lock, so no compaction is in progress: leftovers are from a crash.
  sweepCompactionTemps(dir);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_APPEND);
    fchmodSync(fd, JOURNAL_MODE); // a journal made before the mode was the owner's alone
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok(new JournalWriter(dir, path, undefined, { synced: true, version: JOURNAL_VERSION }, options));
    return err(unwritable(path, e));
  }
  const prepared = prepare(fd, path, dir);
  if (!prepared.ok) {
    closeSync(fd);
    return prepared;
  }
  return ok(new JournalWriter(dir, path, fd, prepared.value, options));
}

/** The lock holder's journal: appends to its fd, and replaces the file when it compacts. */
class JournalWriter implements JournalStore {
  readonly path: string;
  readonly #dir: string;
  readonly #options: JournalOptions;
  readonly #compactWhen: NonNullable<JournalOptions['compactWhen']>;
  #open = true;
  /** The fd appends go to (O_APPEND); undefined when it could not be reopened after a compaction, or before #made. */
  #fd: number | undefined;
  /** Whether the file is there: a missing journal is made by the first append. */
  #made: boolean;
  /** Set when a write failed part-way: the next line must start on a fresh line. */
  #needsNewline = false;
  /** Whether anything was written since the last fsync: a run that appended nothing (a no-op) does not pay for one when it closes. */
  #unsynced: boolean;
  /** Where the next line goes (the file's size: O_APPEND and the lock make it so); undefined until an append asks, and again after a failed write. */
  #end: number | undefined;
  // What the file's header and the last load found, and what was appended since: what tidy() decides from.
  #version: number;
  #loadedLines = 0;
  #appendedLines = 0;
  #dropped = 0;
  /** An append superseded a line that must not stay on disk (StateStore.append, scrub). */
  #scrub = false;

  constructor(dir: string, path: string, fd: number | undefined, prepared: { readonly synced: boolean; readonly version: number }, options: JournalOptions) {
    this.#dir = dir;
    this.path = path;
    this.#fd = fd;
    this.#made = fd !== undefined;
    this.#unsynced = !prepared.synced;
    this.#version = prepared.version;
    this.#options = options;
    this.#compactWhen = options.compactWhen ?? defaultCompactWhen;
  }

  load(): Result<LoadedState, StateError> {
    this.#guard();
    if (!this.#made) return ok(noJournal());
    if (this.#fd === undefined) return err(this.#reopenError());
    const read = decodeFile(this.path);
    if (!read.ok) return read;
    const { decoded, bytes } = read.value;
    this.#version = decoded.version;
    this.#loadedLines = decoded.lines;
    this.#appendedLines = 0;
    this.#dropped = decoded.dropped;
    return ok(toLoaded(decoded, bytes, false));
  }

  tidy(live: number): Result<CompactionStats | undefined, StateError> {
    this.#guard();
    if (!this.#made) return ok(undefined);
    if (this.#fd === undefined) return err(this.#reopenError());
    const clean = this.#dropped === 0 && !this.#scrub && this.#version === JOURNAL_VERSION;
    if (clean && !this.#compactWhen({ lines: this.#loadedLines + this.#appendedLines, live })) return ok(undefined);
    return this.#rewriteFile();
  }

  append(record: StoredRecord, scrubbing?: boolean): Result<Appended | undefined, StateError> {
    this.#guard();
    const line = encodeLine(record);
    if (!this.#made) {
      const made = this.#make();
      if (!made.ok) return made;
    }
    if (this.#fd === undefined) return err(this.#reopenError());
    // A journal of an older format is rewritten in this one before a line of this one goes in.
    if (this.#version !== JOURNAL_VERSION) {
      const rewritten = this.#rewriteFile();
      if (!rewritten.ok) return rewritten;
      if (this.#fd === undefined) return err(this.#reopenError());
    }
    const fd = this.#fd;
    this.#appendedLines++;
    const buf = this.#needsNewline ? Buffer.concat([NEWLINE_BYTE, line]) : line;
    this.#unsynced = true;
    // Where the line's payload goes; not knowing it only means the record is kept whole (RecordTable).
    let at: number | undefined;
    try {
      this.#end ??= fstatSync(fd).size;
      at = this.#end + buf.length - line.length + PAYLOAD_AT;
    } catch {
      this.#end = undefined;
    }
    try {
      writeAll(fd, buf);
    } catch (e) {
      this.#needsNewline = true; // whatever part got written is a torn line; do not glue onto it
      this.#end = undefined;
      return err(writeFailed(this.path, e));
    }
    this.#needsNewline = false;
    if (scrubbing === true) this.#scrub = true;
    if (this.#end !== undefined) this.#end += buf.length;
    if (at === undefined) return ok(undefined);
    const bytes = line.length - FRAMING_BYTES;
    return ok({ at, bytes, ...(isTombstone(record) ? {} : { head: line.toString('latin1', PAYLOAD_AT, PAYLOAD_AT + HEAD_LENGTH) }) });
  }

  /** Bound, so that it can be handed on as a function (RecordTable.setWritten). */
  readonly readBack = ({ at, bytes }: Appended): string | undefined => {
    if (this.#fd === undefined || at < PAYLOAD_AT) return undefined;
    try {
      const line = readAt(this.#fd, at - PAYLOAD_AT, bytes + FRAMING_BYTES);
      const end = bytes + PAYLOAD_AT;
      return line.length === bytes + FRAMING_BYTES && line[end] === NEWLINE ? verifiedPayload(line, 0, end) : undefined;
    } catch {
      return undefined;
    }
  };

  sync(): Result<void, StateError> {
    this.#guard();
    if (!this.#made) return ok(undefined);
    if (this.#fd === undefined) return err(this.#reopenError());
    if (!this.#unsynced) return ok(undefined);
    try {
      fsyncSync(this.#fd);
      this.#unsynced = false;
      return ok(undefined);
    } catch (e) {
      return err(writeFailed(this.path, e));
    }
  }

  compact(): Result<CompactionStats, StateError> {
    this.#guard();
    if (!this.#made) return ok({ linesBefore: 0, live: 0, bytesBefore: 0, bytesAfter: 0 });
    if (this.#fd === undefined) return err(this.#reopenError());
    return this.#rewriteFile();
  }

  close(): void {
    if (!this.#open) return;
    this.#open = false;
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }

  #guard(): void {
    if (!this.#open) throw new Error('state journal used after close()');
  }

  /** Makes the missing journal: its header written whole to a temporary file, renamed into place, so no journal is ever empty. */
  #make(): Result<void, StateError> {
    const tmp = join(this.#dir, `${COMPACT_TMP_PREFIX}${process.pid}-${randomId().slice(0, 8)}.tmp`);
    try {
      const tfd = openSync(tmp, 'wx', JOURNAL_MODE);
      try {
        writeAll(tfd, headerLine());
        fsyncSync(tfd);
      } finally {
        closeSync(tfd);
      }
      renameSync(tmp, this.path);
      fsyncDir(this.#dir);
      this.#fd = openSync(this.path, 'a+', JOURNAL_MODE);
    } catch (e) {
      try {
        unlinkSync(tmp);
      } catch {
        // swept by the next writer
      }
      return err(writeFailed(this.path, e));
    }
    this.#made = true;
    return ok(undefined);
  }

  #reopenError(): StateError {
    return {
      reason: 'state-write-failed',
      path: this.path,
      code: 'EBADF',
      message: `the state journal ${this.path} could not be reopened after compaction`,
      detail: 'the journal could not be reopened after compaction',
    };
  }

  /** Reads the journal as it is now and rewrites it as one line per live task. */
  #rewriteFile(): Result<CompactionStats, StateError> {
    const read = decodeFile(this.path);
    if (!read.ok) return read;
    const { decoded, bytes } = read.value;
    try {
      return this.#replaceWith(decoded, bytes);
    } finally {
      decoded.records.close();
    }
  }

  /** The compacted journal's bytes: a line as it was, checksum and all, where the load kept it; a record the load changed, encoded anew. */
  static #compacted(records: RecordTable): Buffer {
    const chunks = [headerLine()];
    for (const id of records.keys()) {
      const line = records.lineBytes(id);
      if (line !== undefined) chunks.push(line, NEWLINE_BYTE);
      else {
        const record = records.get(id);
        if (record !== undefined) chunks.push(encodeLine(record));
      }
    }
    return Buffer.concat(chunks);
  }

  #replaceWith(decoded: DecodedJournal, bytesBefore: number): Result<CompactionStats, StateError> {
    const { records } = decoded;
    const dir = this.#dir;
    const tmp = join(dir, `${COMPACT_TMP_PREFIX}${process.pid}-${randomId().slice(0, 8)}.tmp`);
    const content = JournalWriter.#compacted(records);
    let tfd: number | undefined;
    try {
      tfd = openSync(tmp, 'wx', JOURNAL_MODE);
      writeAll(tfd, content);
      fsyncSync(tfd);
      closeSync(tfd);
      tfd = undefined;
      this.#options.onCompactStep?.('written', tmp);
      renameSync(tmp, this.path);
    } catch (e) {
      if (tfd !== undefined) closeSync(tfd);
      try {
        unlinkSync(tmp);
      } catch {
        // swept by the next writer
      }
      return err(writeFailed(tmp, e));
    }
    fsyncDir(dir);
    this.#options.onCompactStep?.('renamed', tmp);
    // Our fd points at the replaced file now; append to the new one.
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
    try {
      this.#fd = openSync(this.path, 'a+', JOURNAL_MODE);
    } catch (e) {
      return err(unwritable(this.path, e));
    }
    this.#needsNewline = false;
    this.#end = undefined;
    this.#version = JOURNAL_VERSION;
    this.#loadedLines = records.size;
    this.#appendedLines = 0;
    this.#dropped = 0;
    this.#scrub = false;
    return ok({ linesBefore: decoded.lines, live: records.size, bytesBefore, bytesAfter: content.length });
  }
}
