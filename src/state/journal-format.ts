// What a journal's lines mean beyond their framing (lines.ts): the header line
// that names the format, a record's line (record.ts, the payload), and the
// checks a reader makes of a header and of a line it has to drop.

import { join, resolve } from 'node:path';
import type { TaskId } from '../ids.ts';
import { newerFormatMessage, type StateUnreadable } from './errors.ts';
import { CHECKSUM_DIGITS, frame, PAYLOAD_AT, verifiedPayload } from './lines.ts';
import { encodePayload, lineKind, validForAppend, type StoredRecord } from './record.ts';

export const JOURNAL_FILE = 'state.jsonl';
export const JOURNAL_FORMAT = 'nodegraph-state';
/**
 * The newest journal format this build reads and writes. 3: a record may keep
 * its value inputs' JSON (`values`), which a nodegraph that reads up to 2 would
 * take for an invalid record; it refuses a version 3 journal instead.
 */
export const JOURNAL_VERSION = 3;
/** `{`: a v1 line's payload is one JSON object (a record line starts with its status). */
export const V1_LINE_START = 0x7b;
/** How far into a dropped line a reader looks for a v2 record's id. */
const ID_SEARCH_BYTES = 1024;

export const journalPath = (stateDir: string): string => join(resolve(stateDir), JOURNAL_FILE);

/** A record's journal line (lines.ts, the framing; record.ts, the payload). */
export function encodeLine(record: StoredRecord): Buffer {
  return frame(encodePayload(validForAppend(record)));
}

export const headerLine = (): Buffer => frame(JSON.stringify({ format: JOURNAL_FORMAT, version: JOURNAL_VERSION }));

/** Best effort: which task a dropped line was about. */
export function guessId(buf: Buffer, start: number, end: number): TaskId | undefined {
  const line = end - start > PAYLOAD_AT ? lineKind(buf, start + PAYLOAD_AT, end) : undefined;
  if (line !== undefined) return buf.toString('latin1', line.idStart, line.idEnd) as TaskId;
  // A v2 record cut short of its JSON: the id stands after the fixed fields.
  const v2 = /^[0-9a-f]{8} [of] (?:[0-9a-f]{64} ){3}(\S+)/.exec(buf.toString('latin1', start, Math.min(end, start + PAYLOAD_AT + ID_SEARCH_BYTES)));
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

const isHexDigit = (c: number): boolean => (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66);

/**
 * Whether bytes without any newline are the beginning of a header this
 * module was writing (a crash while creating the journal), as opposed to
 * some other file: only the former may be treated as empty and replaced.
 */
export function isTornHeader(buf: Buffer): boolean {
  const expected = headerLine();
  if (buf.length >= expected.length) return false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]!;
    if (i < CHECKSUM_DIGITS ? !isHexDigit(c) : c !== expected[i]) return false;
  }
  return true;
}

export type HeaderCheck = { ok: true; version: number } | { ok: false; error: StateUnreadable };

export function checkHeader(buf: Buffer, start: number, end: number, path: string): HeaderCheck {
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

/** Whether a header that did not check out may be replaced: it was torn while being written, not another file's or a newer format's. */
export const replaceableHeader = (check: HeaderCheck, head: Buffer): boolean =>
  check.ok || (check.error.kind !== 'newer-format' && isTornHeader(head));

export const newerFormat = (path: string, found: number): StateUnreadable => ({
  reason: 'state-unreadable',
  path,
  kind: 'newer-format',
  found,
  supported: JOURNAL_VERSION,
  message: newerFormatMessage(path, 'state', found, JOURNAL_VERSION),
});
