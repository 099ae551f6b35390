// The state journal: `<stateDir>/state.jsonl`, append-only, compacted now
// and then. "State is sacred": a crash, kill -9, Ctrl-C or a second run must
// never corrupt it or make the tool trust something it did not verify.
//
// Format (the framing is lines.ts). One record per line, `<crc32 as 8 hex> <payload>\n`,
// where the CRC-32 (node:zlib) covers the payload's UTF-8 bytes. Line 1 is a
// header `{"format":"nodegraph-state","version":3}` in the same framing. A
// payload (record.ts, the line format) is a record's fixed fields, its id and
// the rest as JSON, which never contains a raw newline: a line is exactly one
// record. A load checks each line's checksum and framing and keeps where it
// lies (records.ts); the JSON is parsed when the record is read whole.
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

import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import type { TaskId } from '../ids.ts';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import {
  ensureStateDir,
  errnoCode,
  errnoMessage,
  fsyncDir,
  newerFormatMessage,
  unwritable,
  writeFailed,
  type StateError,
  type StateUnreadable,
} from './errors.ts';
import { readLock, type Lock, type Locked } from './lock.ts';
import { bufferSource, fdSource, frame, linesOf, NEWLINE, verified, verifiedPayload, type JournalSource, type Line } from './lines.ts';
import { RecordTable } from './records.ts';
import { checkRecord, encodePayload, HEAD_LENGTH, isTombstone, lineKind, RECORD_VERSION, validForAppend, type StoredRecord } from './record.ts';
import type {
  LoadedState,
  LoadStats,
  StateStore,
  StateWarning,
} from './store.ts';

export const JOURNAL_FILE = 'state.jsonl';
export const JOURNAL_FORMAT = 'nodegraph-state';
/**
 * The newest journal format this build reads and writes. 3: a record may keep
 * its value inputs' JSON (`values`), which a nodegraph that reads up to 2 would
 * take for an invalid record; it refuses a version 3 journal instead.
 */
export const JOURNAL_VERSION = 3;

const NEWLINE_BYTE = Buffer.of(0x0a);
const COMPACT_TMP_PREFIX = `${JOURNAL_FILE}.compact-`;

export const journalPath = (stateDir: string): string => join(resolve(stateDir), JOURNAL_FILE);

export { bufferSource, fdSource, frame, type JournalSource };

/** A record's journal line (lines.ts, the framing; record.ts, the payload). */
export function encodeLine(record: StoredRecord): Buffer {
  return frame(encodePayload(validForAppend(record)));
}

const headerLine = (): Buffer => frame(JSON.stringify({ format: JOURNAL_FORMAT, version: JOURNAL_VERSION }));

/** Best effort: which task a dropped line was about. */
function guessId(buf: Buffer, start: number, end: number): TaskId | undefined {
  const line = end - start > 9 ? lineKind(buf, start + 9, end) : undefined;
  if (line !== undefined) return buf.toString('latin1', line.idStart, line.idEnd) as TaskId;
  // A v2 record cut short of its JSON: the id stands after the fixed fields.
  const v2 = /^[0-9a-f]{8} [of] (?:[0-9a-f]{64} ){3}(\S+)/.exec(buf.toString('latin1', start, Math.min(end, start + 9 + 1024)));
  if (v2 !== null) return v2[1] as TaskId;
  const text = buf.toString('utf8', start, end);
  const brace = text.indexOf('{');
  if (brace >= 0) {
    try {
      const value: unknown = JSON.parse(text.slice(brace));
      if (typeof value === 'object' && value !== null && 'id' in value && typeof value.id === 'string' && value.id !== '') {
        return value.id as TaskId;
      }
    } catch {
      // torn or corrupt: fall back to a pattern
    }
  }
  const m = /"id":("(?:[^"\\]|\\.)+")/.exec(text);
  if (m === null) return undefined;
  try {
    const id: unknown = JSON.parse(m[1]!);
    return typeof id === 'string' && id !== '' ? (id as TaskId) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether bytes without any newline are the beginning of a header this
 * module was writing (a crash while creating the journal), as opposed to
 * some other file: only the former may be treated as empty and replaced.
 */
function isTornHeader(buf: Buffer): boolean {
  const expected = headerLine();
  if (buf.length >= expected.length) return false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]!;
    if (i < 8 ? !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) : c !== expected[i]) return false;
  }
  return true;
}

type HeaderCheck = { ok: true; version: number } | { ok: false; error: StateUnreadable };

function checkHeader(buf: Buffer, start: number, end: number, path: string): HeaderCheck {
  const bad = (message: string): HeaderCheck => ({
    ok: false,
    error: {
      reason: 'state-unreadable',
      path,
      kind: 'bad-header',
      message: `${path} is not a readable nodegraph state journal (${message}); it was left untouched — move it aside to start with empty state`,
    },
  });
  const payload = verifiedPayload(buf, start, end);
  if (payload === undefined) return bad('its header line is corrupt');
  let header: unknown;
  try {
    header = JSON.parse(payload);
  } catch {
    return bad('its header line is not JSON');
  }
  if (typeof header !== 'object' || header === null) return bad('no header');
  const { format, version } = header as { format?: unknown; version?: unknown };
  if (format !== JOURNAL_FORMAT) return bad(`unknown format ${JSON.stringify(format)}`);
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) return bad('invalid version');
  if (version > JOURNAL_VERSION) return { ok: false, error: newerFormat(path, version) };
  return { ok: true, version };
}

const newerFormat = (path: string, found: number): StateUnreadable => ({
  reason: 'state-unreadable',
  path,
  kind: 'newer-format',
  found,
  supported: JOURNAL_VERSION,
  message: newerFormatMessage(path, 'state', found, JOURNAL_VERSION),
});

export interface DecodedJournal {
  readonly records: RecordTable;
  readonly warnings: StateWarning[];
  /** Record lines (not the header, not empty lines). */
  readonly lines: number;
  readonly dropped: number;
  /** The header's format version; 0 for a journal with no header yet. */
  readonly version: number;
  /** Every accepted record in file order, when asked for (diagnostics and tests). */
  readonly entries?: { readonly line: number; readonly record: StoredRecord }[];
}

/**
 * Decodes and replays a journal: last good record per id wins, tombstones
 * delete, torn/corrupt/invalid lines are dropped with a warning. The records
 * keep `source` to read each one's JSON when it is first asked for. err only
 * for a journal this build must not read.
 */
export function decodeJournal(
  from: Buffer | JournalSource,
  path: string,
  options: { readonly keepEntries?: boolean } = {},
): Result<DecodedJournal, StateUnreadable> {
  const source = Buffer.isBuffer(from) ? bufferSource(from) : from;
  const records = new RecordTable(source);
  const warnings: StateWarning[] = [];
  const entries: { line: number; record: StoredRecord }[] | undefined = options.keepEntries ? [] : undefined;
  const empty = (version: number): DecodedJournal => ({ records, warnings, lines: 0, dropped: 0, version, ...(entries ? { entries } : {}) });
  if (source.size === 0) {
    // A journal is created with its header: an empty one was emptied (or its creation torn).
    // Nothing can be read from it, and every task counts as never run: say so.
    warnings.push({ kind: 'empty-journal', message: `the journal is empty, not even its header: starting from empty state (a task applied before counts as never run)` });
    return ok(empty(0));
  }

  // Line number of each id's last good record, and dropped lines attributed to an id.
  // Only a good line after a dropped one can clear it, so lines are noted from the
  // first drop on: a clean journal fills no map for it.
  const lastGood = new Map<string, number>();
  const suspects: { id: TaskId; line: number }[] = [];
  let lines = 0;
  let dropped = 0;
  let lineNo = 0;
  let version = 0;
  const drop = (kind: StateWarning['kind'], { buf, start, end }: Line, why: string): void => {
    dropped++;
    const id = guessId(buf, start, end);
    if (id !== undefined) suspects.push({ id, line: lineNo });
    warnings.push({
      kind,
      line: lineNo,
      ...(id === undefined ? {} : { id }),
      message: `line ${lineNo}: ${why}${id === undefined ? '' : ` (apparently for ${id})`}; dropped`,
    });
  };

  for (const line of linesOf(source)) {
    lineNo++;
    const { buf, start, end } = line;
    if (lineNo === 1) {
      const header = checkHeader(buf, start, end, path);
      if (line.terminated) {
        if (!header.ok) return err(header.error);
        version = header.version;
        continue;
      }
      // No complete line: a header that lost its newline, or a torn header.
      // No record can precede the header, so nothing is lost either way.
      const head = buf.subarray(start, end);
      if (!header.ok && (header.error.kind === 'newer-format' || !isTornHeader(head))) return err(header.error);
      if (!header.ok) warnings.push({ kind: 'torn-header', line: 1, message: `line 1: the journal header was cut off; starting from empty state` });
      return ok(empty(header.ok ? header.version : 0));
    }
    if (end === start) continue; // an empty line carries nothing
    lines++;
    if (!verified(buf, start, end)) {
      if (line.terminated) drop('corrupt-line', line, 'checksum mismatch (corrupted, or cut off by an earlier crash)');
      else drop('torn-line', line, 'the last line was cut off mid-write');
      continue;
    }
    const at = start + 9;
    const kind = buf[at] === 0x7b ? undefined : lineKind(buf, at, end);
    if (kind !== undefined) {
      const id = buf.toString('latin1', kind.idStart, kind.idEnd) as TaskId;
      if (suspects.length > 0) lastGood.set(id, lineNo);
      if (kind.kind === 'tombstone') records.delete(id);
      else records.setLine(id, buf, at, line.base + at, end - at);
      if (entries !== undefined) {
        const record = kind.kind === 'tombstone' ? ({ v: 1, id, deleted: true } as const) : records.get(id);
        if (record !== undefined) entries.push({ line: lineNo, record });
      }
      continue;
    }
    if (buf[at] !== 0x7b) {
      drop('invalid-record', line, 'not a record line despite a good checksum');
      continue;
    }
    // A v1 line: one JSON object.
    let value: unknown;
    try {
      value = JSON.parse(buf.toString('utf8', at, end));
    } catch {
      drop('invalid-record', line, 'not JSON despite a good checksum');
      continue;
    }
    if (typeof value === 'object' && value !== null && 'v' in value && typeof value.v === 'number' && value.v > RECORD_VERSION) {
      return err(newerFormat(path, value.v));
    }
    const check = checkRecord(value, false);
    if (!check.ok) {
      drop('invalid-record', line, `invalid record: ${check.message}`);
      continue;
    }
    const record = check.record;
    if (suspects.length > 0) lastGood.set(record.id, lineNo);
    if (isTombstone(record)) records.delete(record.id);
    else records.set(record);
    entries?.push({ line: lineNo, record });
  }

  const distrusted = new Set<string>();
  for (const { id, line } of suspects) {
    if ((lastGood.get(id) ?? 0) > line || distrusted.has(id)) continue;
    distrusted.add(id);
    const record = records.get(id);
    if (record === undefined) {
      warnings.push({
        kind: 'distrusted',
        id,
        line,
        message: `${id}: its newest record (line ${line}) was lost and there is no earlier record to fall back on; it is treated as never run`,
      });
      continue;
    }
    records.set({
      ...record,
      status: 'failed',
      error: `state record lost (journal line ${line} was unreadable); the task must run again`,
    });
    warnings.push({
      kind: 'distrusted',
      id,
      line,
      message: `${id}: its newest record (line ${line}) was lost; its previous record is kept as 'failed' so it runs again`,
    });
  }
  return ok({ records, warnings, lines, dropped, version, ...(entries ? { entries } : {}) });
}

const toLoaded = (decoded: DecodedJournal, bytes: number, compacted: boolean, extra: StateWarning[] = []): LoadedState => {
  const stats: LoadStats = { lines: decoded.lines, dropped: decoded.dropped, live: decoded.records.size, bytes, compacted };
  return { records: decoded.records, warnings: [...decoded.warnings, ...extra], stats };
};

/**
 * Loads the state read-only, without the lock (e.g. for `plan`): no repair,
 * no compaction, nothing written. A missing journal is empty state.
 */
export function readState(stateDir: string): Result<LoadedState, StateUnreadable> {
  const path = journalPath(stateDir);
  let source: JournalSource;
  try {
    source = fdSource(openSync(path, 'r'));
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return ok(toLoaded({ records: new RecordTable(bufferSource(Buffer.alloc(0))), warnings: [], lines: 0, dropped: 0, version: JOURNAL_VERSION }, 0, false));
    return err({ reason: 'state-unreadable', path, kind: 'io', code: errnoCode(e), message: `cannot read ${path}: ${errnoMessage(e)}` });
  }
  const decoded = decodeCurrentSource(source, path);
  if (!decoded.ok) return decoded;
  return ok(toLoaded(decoded.value, source.size, false));
}

/** Decodes a source, closing it when the journal must not be read (the records keep it otherwise). */
function decodeCurrentSource(source: JournalSource, path: string): Result<DecodedJournal, StateUnreadable> {
  let decoded: Result<DecodedJournal, StateUnreadable>;
  try {
    decoded = decodeJournal(source, path);
  } catch (e) {
    source.close();
    return err({ reason: 'state-unreadable', path, kind: 'io', code: errnoCode(e), message: `cannot read ${path}: ${errnoMessage(e)}` });
  }
  if (!decoded.ok) source.close();
  return decoded;
}

export interface CompactionStats {
  readonly linesBefore: number;
  readonly live: number;
  readonly bytesBefore: number;
  readonly bytesAfter: number;
}

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
    const head = readAt(fd, 0, Math.min(size, 4096));
    const nl = head.indexOf(NEWLINE);
    if (nl === -1) {
      if (size > head.length) return err({ reason: 'state-unreadable', path, kind: 'bad-header', message: `${path} does not start with a nodegraph journal header; it was left untouched` });
      const header = checkHeader(head, 0, head.length, path);
      if (!header.ok && (header.error.kind === 'newer-format' || !isTornHeader(head))) return err(header.error);
      let version = JOURNAL_VERSION;
      if (header.ok) {
        writeAll(fd, Buffer.of(NEWLINE)); // a complete header that only lost its newline
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
    writeAll(fd, Buffer.of(NEWLINE)); // see "Torn tails" above
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
 * may append or compact. Creates the state directory and the journal if
 * needed, and refuses a journal written by a newer format.
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
    fd = openSync(path, 'a+', 0o644); // O_RDWR | O_APPEND | O_CREAT
  } catch (e) {
    return err(unwritable(path, e));
  }
  const prepared = prepare(fd, path, dir);
  if (!prepared.ok) {
    closeSync(fd);
    return prepared;
  }

  let open = true;
  let current: number | undefined = fd;
  // Set when a write failed part-way: the next line must start on a fresh line.
  let needsNewline = false;
  // Whether anything was written since the last fsync: a run that appended
  // nothing (a no-op) does not pay for one when it closes.
  let unsynced = !prepared.value.synced;
  // Where the next line goes (the file's size: O_APPEND and the lock make it
  // so); undefined until an append asks, and again after a failed write.
  let end: number | undefined;
  const compactWhen = options.compactWhen ?? defaultCompactWhen;
  // What the file's header and the last load found, and what was appended since: what tidy() decides from.
  let version = prepared.value.version;
  let loadedLines = 0;
  let appendedLines = 0;
  let dropped = 0;
  // An append superseded a line that must not stay on disk (StateStore.append, scrub).
  let scrub = false;

  const guard = (): void => {
    if (!open) throw new Error('state journal used after close()');
  };
  // A load reads through an fd of its own, kept by the records it made (they read each one's
  // JSON when asked): it keeps the file as loaded even after a compaction replaces it.
  const decodeCurrent = (): Result<{ decoded: DecodedJournal; bytes: number }, StateError> => {
    let source: JournalSource;
    try {
      source = fdSource(openSync(path, 'r'));
    } catch (e) {
      return err({ reason: 'state-unreadable', path, kind: 'io', code: errnoCode(e), message: `cannot read ${path}: ${errnoMessage(e)}` });
    }
    const decoded = decodeCurrentSource(source, path);
    return decoded.ok ? ok({ decoded: decoded.value, bytes: source.size }) : decoded;
  };

  const rewrite = (decoded: DecodedJournal, bytesBefore: number): Result<CompactionStats, StateError> => {
    const { records } = decoded;
    const linesBefore = decoded.lines;
    try {
      return replaceWith(records, linesBefore, bytesBefore);
    } finally {
      records.close();
    }
  };

  const replaceWith = (records: RecordTable, linesBefore: number, bytesBefore: number): Result<CompactionStats, StateError> => {
    const tmp = join(dir, `${COMPACT_TMP_PREFIX}${process.pid}-${randomId().slice(0, 8)}.tmp`);
    const chunks = [headerLine()];
    // A line as it was, checksum and all, where the load kept it; a record the load changed, encoded anew.
    for (const id of records.keys()) {
      const line = records.lineBytes(id);
      if (line !== undefined) chunks.push(line, NEWLINE_BYTE);
      else {
        const record = records.get(id);
        if (record !== undefined) chunks.push(encodeLine(record));
      }
    }
    const content = Buffer.concat(chunks);
    let tfd: number | undefined;
    try {
      tfd = openSync(tmp, 'wx', 0o644);
      writeAll(tfd, content);
      fsyncSync(tfd);
      closeSync(tfd);
      tfd = undefined;
      options.onCompactStep?.('written', tmp);
      renameSync(tmp, path);
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
    options.onCompactStep?.('renamed', tmp);
    // Our fd points at the replaced file now; append to the new one.
    if (current !== undefined) closeSync(current);
    current = undefined;
    try {
      current = openSync(path, 'a+', 0o644);
    } catch (e) {
      return err(unwritable(path, e));
    }
    needsNewline = false;
    end = undefined;
    version = JOURNAL_VERSION;
    loadedLines = records.size;
    appendedLines = 0;
    dropped = 0;
    scrub = false;
    return ok({ linesBefore, live: records.size, bytesBefore, bytesAfter: content.length });
  };

  const reopenError = (): StateError => ({
    reason: 'state-write-failed',
    path,
    code: 'EBADF',
    message: `the state journal ${path} could not be reopened after compaction`,
    detail: 'the journal could not be reopened after compaction',
  });

  const store: JournalStore = {
    path,
    load() {
      guard();
      if (current === undefined) return err(reopenError());
      const read = decodeCurrent();
      if (!read.ok) return read;
      const { decoded, bytes } = read.value;
      version = decoded.version;
      loadedLines = decoded.lines;
      appendedLines = 0;
      dropped = decoded.dropped;
      return ok(toLoaded(decoded, bytes, false));
    },
    tidy(live) {
      guard();
      if (current === undefined) return err(reopenError());
      if (dropped === 0 && !scrub && version === JOURNAL_VERSION && !compactWhen({ lines: loadedLines + appendedLines, live })) return ok(undefined);
      const read = decodeCurrent();
      if (!read.ok) return read;
      return rewrite(read.value.decoded, read.value.bytes);
    },
    append(record, scrubbing) {
      guard();
      const line = encodeLine(record);
      if (current === undefined) return err(reopenError());
      // A journal of an older format is rewritten in this one before a line of this one goes in.
      if (version !== JOURNAL_VERSION) {
        const read = decodeCurrent();
        const rewritten = read.ok ? rewrite(read.value.decoded, read.value.bytes) : read;
        if (!rewritten.ok) return rewritten;
        if (current === undefined) return err(reopenError());
      }
      appendedLines++;
      const buf = needsNewline ? Buffer.concat([Buffer.of(NEWLINE), line]) : line;
      unsynced = true;
      // Where the line's payload goes; not knowing it only means the record is kept whole (RecordTable).
      let at: number | undefined;
      try {
        end ??= fstatSync(current).size;
        at = end + buf.length - line.length + 9;
      } catch {
        end = undefined;
      }
      try {
        writeAll(current, buf);
        needsNewline = false;
        if (scrubbing === true) scrub = true;
        if (end !== undefined) end += buf.length;
        if (at === undefined) return ok(undefined);
        return ok({ at, bytes: line.length - 10, ...(isTombstone(record) ? {} : { head: line.toString('latin1', 9, 9 + HEAD_LENGTH) }) });
      } catch (e) {
        needsNewline = true; // whatever part got written is a torn line; do not glue onto it
        end = undefined;
        return err(writeFailed(path, e));
      }
    },
    readBack({ at, bytes }) {
      if (current === undefined || at < 9) return undefined;
      try {
        const line = readAt(current, at - 9, bytes + 10);
        return line.length === bytes + 10 && line[bytes + 9] === NEWLINE ? verifiedPayload(line, 0, bytes + 9) : undefined;
      } catch {
        return undefined;
      }
    },
    sync() {
      guard();
      if (current === undefined) return err(reopenError());
      if (!unsynced) return ok(undefined);
      try {
        fsyncSync(current);
        unsynced = false;
        return ok(undefined);
      } catch (e) {
        return err(writeFailed(path, e));
      }
    },
    compact() {
      guard();
      if (current === undefined) return err(reopenError());
      const read = decodeCurrent();
      if (!read.ok) return read;
      return rewrite(read.value.decoded, read.value.bytes);
    },
    close() {
      if (!open) return;
      open = false;
      if (current !== undefined) closeSync(current);
      current = undefined;
    },
  };
  return ok(store);
}
