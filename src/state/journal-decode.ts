// Reading a journal: its lines replayed into a RecordTable, last good record
// per id winning, tombstones deleting, and every line that cannot be trusted
// dropped with a warning (journal.ts states the guarantees this keeps).

import { openSync } from 'node:fs';
import type { TaskId } from '../ids.ts';
import { err, ok, type Result } from '../util/result.ts';
import { errnoCode, readFailed, type StateUnreadable } from './errors.ts';
import { checkHeader, guessId, JOURNAL_VERSION, journalPath, newerFormat, replaceableHeader, V1_LINE_START } from './journal-format.ts';
import { bufferSource, fdSource, linesOf, PAYLOAD_AT, verified, type JournalSource, type Line } from './lines.ts';
import { checkRecord, isTombstone, lineKind, RECORD_VERSION, type StoredRecord } from './record.ts';
import { RecordTable } from './records.ts';
import type { LoadedState, LoadStats } from './store.ts';
import type { StateWarning } from './types.ts';

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

/** One pass over a journal's lines: what it has kept, dropped and suspects so far. */
class Replay {
  readonly records: RecordTable;
  readonly warnings: StateWarning[] = [];
  readonly entries: { line: number; record: StoredRecord }[] | undefined;
  lines = 0;
  dropped = 0;
  lineNo = 0;
  version = 0;
  /**
   * Line number of each id's last good record, and dropped lines attributed to an id.
   * Only a good line after a dropped one can clear it, so lines are noted from the
   * first drop on: a clean journal fills no map for it.
   */
  readonly #lastGood = new Map<string, number>();
  readonly #suspects: { id: TaskId; line: number }[] = [];

  constructor(source: JournalSource, keepEntries: boolean) {
    this.records = new RecordTable(source);
    this.entries = keepEntries ? [] : undefined;
  }

  result(lines = this.lines, dropped = this.dropped): DecodedJournal {
    const { records, warnings, version, entries } = this;
    return { records, warnings, lines, dropped, version, ...(entries ? { entries } : {}) };
  }

  drop(kind: StateWarning['kind'], { buf, start, end }: Line, why: string): void {
    this.dropped++;
    const id = guessId(buf, start, end);
    if (id !== undefined) this.#suspects.push({ id, line: this.lineNo });
    this.warnings.push({
      kind,
      line: this.lineNo,
      ...(id === undefined ? {} : { id }),
      message: `line ${this.lineNo}: ${why}${id === undefined ? '' : ` (apparently for ${id})`}; dropped`,
    });
  }

  #kept(id: TaskId): void {
    if (this.#suspects.length > 0) this.#lastGood.set(id, this.lineNo);
  }

  /** A record line (record.ts, the line format) or a tombstone; false when the payload is neither. */
  recordLine(line: Line): boolean {
    const { buf, end } = line;
    const at = line.start + PAYLOAD_AT;
    const kind = buf[at] === V1_LINE_START ? undefined : lineKind(buf, at, end);
    if (kind === undefined) return false;
    const id = buf.toString('latin1', kind.idStart, kind.idEnd) as TaskId;
    this.#kept(id);
    if (kind.kind === 'tombstone') this.records.tombstone(id);
    else this.records.setLine(id, buf, at, line.base + at, end - at);
    if (this.entries !== undefined) {
      const record = kind.kind === 'tombstone' ? ({ v: 1, id, deleted: true } as const) : this.records.get(id);
      if (record !== undefined) this.entries.push({ line: this.lineNo, record });
    }
    return true;
  }

  /** A v1 line, one JSON object; err for a record of a newer format. */
  v1Line(line: Line, path: string): Result<void, StateUnreadable> {
    const { buf, end } = line;
    const at = line.start + PAYLOAD_AT;
    if (buf[at] !== V1_LINE_START) {
      this.drop('invalid-record', line, 'not a record line despite a good checksum');
      return ok(undefined);
    }
    let value: unknown;
    try {
      value = JSON.parse(buf.toString('utf8', at, end));
    } catch {
      this.drop('invalid-record', line, 'not JSON despite a good checksum');
      return ok(undefined);
    }
    if (typeof value === 'object' && value !== null && 'v' in value && typeof value.v === 'number' && value.v > RECORD_VERSION) {
      return err(newerFormat(path, value.v));
    }
    const check = checkRecord(value, false);
    if (!check.ok) {
      this.drop('invalid-record', line, `invalid record: ${check.message}`);
      return ok(undefined);
    }
    const record = check.record;
    this.#kept(record.id);
    if (isTombstone(record)) this.records.tombstone(record.id);
    else this.records.set(record);
    this.entries?.push({ line: this.lineNo, record });
    return ok(undefined);
  }

  /** Keeps as 'failed' each task whose newest line was dropped after its last good one (see journal.ts). */
  distrust(): void {
    const distrusted = new Set<string>();
    for (const { id, line } of this.#suspects) {
      if ((this.#lastGood.get(id) ?? 0) > line || distrusted.has(id)) continue;
      distrusted.add(id);
      const record = this.records.get(id);
      if (record === undefined) {
        this.warnings.push({
          kind: 'distrusted',
          id,
          line,
          message: `${id}: its newest record (line ${line}) was lost and there is no earlier record to fall back on; it is treated as never run`,
        });
        continue;
      }
      this.records.set({
        ...record,
        status: 'failed',
        error: `state record lost (journal line ${line} was unreadable); the task must run again`,
      });
      this.warnings.push({
        kind: 'distrusted',
        id,
        line,
        message: `${id}: its newest record (line ${line}) was lost; its previous record is kept as 'failed' so it runs again`,
      });
    }
  }
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
  const replay = new Replay(source, options.keepEntries === true);
  if (source.size === 0) {
    // A journal is created with its header: an empty one was emptied (or its creation torn).
    // Nothing can be read from it, and every task counts as never run: say so.
    replay.warnings.push({ kind: 'empty-journal', message: `the journal is empty, not even its header: starting from empty state (a task applied before counts as never run)` });
    return ok(replay.result(0, 0));
  }
  for (const line of linesOf(source)) {
    replay.lineNo++;
    const { buf, start, end } = line;
    if (replay.lineNo === 1) {
      const header = checkHeader(buf, start, end, path);
      if (line.terminated) {
        if (!header.ok) return err(header.error);
        replay.version = header.version;
        continue;
      }
      // No complete line: a header that lost its newline, or a torn header.
      // No record can precede the header, so nothing is lost either way.
      if (!header.ok && !replaceableHeader(header, buf.subarray(start, end))) return err(header.error);
      if (!header.ok) replay.warnings.push({ kind: 'torn-header', line: 1, message: `line 1: the journal header was cut off; starting from empty state` });
      replay.version = header.ok ? header.version : 0;
      return ok(replay.result(0, 0));
    }
    if (end === start) continue; // an empty line carries nothing
    replay.lines++;
    if (!verified(buf, start, end)) {
      if (line.terminated) replay.drop('corrupt-line', line, 'checksum mismatch (corrupted, or cut off by an earlier crash)');
      else replay.drop('torn-line', line, 'the last line was cut off mid-write');
      continue;
    }
    if (replay.recordLine(line)) continue;
    const v1 = replay.v1Line(line, path);
    if (!v1.ok) return v1;
  }
  replay.distrust();
  return ok(replay.result());
}

export const toLoaded = (decoded: DecodedJournal, bytes: number, compacted: boolean, extra: StateWarning[] = []): LoadedState => {
  const stats: LoadStats = { lines: decoded.lines, dropped: decoded.dropped, live: decoded.records.size, bytes, compacted };
  return { records: decoded.records, warnings: [...decoded.warnings, ...extra], stats };
};

/**
 * Decodes the journal at `path` through an fd of its own, kept by the records it made (they read
 * each one's JSON when asked): it keeps the file as loaded even after a compaction replaces it.
 */
export function decodeFile(path: string): Result<{ decoded: DecodedJournal; bytes: number }, StateUnreadable> {
  let source: JournalSource;
  try {
    source = fdSource(openSync(path, 'r'));
  } catch (e) {
    return err(readFailed(path, e));
  }
  const decoded = decodeSource(source, path);
  return decoded.ok ? ok({ decoded: decoded.value, bytes: source.size }) : decoded;
}

/** Decodes a source, closing it when the journal must not be read (the records keep it otherwise). */
function decodeSource(source: JournalSource, path: string): Result<DecodedJournal, StateUnreadable> {
  let decoded: Result<DecodedJournal, StateUnreadable>;
  try {
    decoded = decodeJournal(source, path);
  } catch (e) {
    source.close();
    return err(readFailed(path, e));
  }
  if (!decoded.ok) source.close();
  return decoded;
}

/** What a missing journal holds: no record. */
export const noJournal = (): LoadedState =>
  toLoaded({ records: new RecordTable(bufferSource(Buffer.alloc(0))), warnings: [], lines: 0, dropped: 0, version: JOURNAL_VERSION }, 0, false);

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
    if (errnoCode(e) === 'ENOENT') return ok(noJournal());
    return err(readFailed(path, e));
  }
  const decoded = decodeSource(source, path);
  return decoded.ok ? ok(toLoaded(decoded.value, source.size, false)) : decoded;
}
