// The journal's framing, apart from what its lines mean: a line is
// `<crc32 as 8 hex> <payload>\n`, the CRC-32 (node:zlib) over the payload's
// UTF-8 bytes; and a file's lines are read a chunk at a time, so that a load
// never holds the whole file.

import { closeSync, fstatSync, readSync } from 'node:fs';

// Built-ins by getBuiltinModule rather than import: see cli/main.ts.
const { crc32 } = process.getBuiltinModule('node:zlib');

export const NEWLINE = 0x0a;
const SPACE = 0x20;
/** A line's layout: the checksum's hex digits, then a space, then the payload from PAYLOAD_AT, then a newline. */
export const CHECKSUM_DIGITS = 8;
export const PAYLOAD_AT = CHECKSUM_DIGITS + 1;
/** Bytes of a line that are not its payload: the checksum, the space and the newline. */
export const FRAMING_BYTES = PAYLOAD_AT + 1;

/** Frames a payload as a journal line. */
export function frame(payload: string): Buffer {
  const bytes = Buffer.from(payload, 'utf8');
  const line = Buffer.allocUnsafe(bytes.length + FRAMING_BYTES);
  line.write(crc32(bytes).toString(16).padStart(CHECKSUM_DIGITS, '0'), 0, 'latin1');
  line[CHECKSUM_DIGITS] = SPACE;
  bytes.copy(line, PAYLOAD_AT);
  line[line.length - 1] = NEWLINE;
  return line;
}

/** The checksum's hex digits at buf[at..] as a number, or -1. */
function checksumAt(buf: Buffer, at: number): number {
  let n = 0;
  for (let i = at; i < at + CHECKSUM_DIGITS; i++) {
    const c = buf[i]!;
    const d = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
    if (d < 0) return -1;
    n = n * 16 + d;
  }
  return n;
}

/** Whether buf[start..end) (a line without its newline) is framed and its checksum matches its payload. */
export function verified(buf: Buffer, start: number, end: number): boolean {
  if (end - start < FRAMING_BYTES || buf[start + CHECKSUM_DIGITS] !== SPACE) return false;
  const want = checksumAt(buf, start);
  return want >= 0 && crc32(buf.subarray(start + PAYLOAD_AT, end)) === want;
}

export const verifiedPayload = (buf: Buffer, start: number, end: number): string | undefined =>
  verified(buf, start, end) ? buf.toString('utf8', start + PAYLOAD_AT, end) : undefined;

/** Where a journal's bytes are read from: the file (by its fd) or, in tests, a buffer. */
export interface JournalSource {
  readonly size: number;
  /** Reads up to `into.length` bytes from `position`; how many it read. */
  read(into: Buffer, position: number): number;
  /** The UTF-8 text of `length` bytes at `at`, or undefined when they cannot be read whole. */
  text(at: number, length: number): string | undefined;
  close(): void;
}

export function bufferSource(buf: Buffer): JournalSource {
  return {
    size: buf.length,
    read: (into, position) => buf.copy(into, 0, position, Math.min(buf.length, position + into.length)),
    text: (at, length) => (at + length <= buf.length ? buf.toString('utf8', at, at + length) : undefined),
    close() {},
  };
}

/** A source over an fd this source owns (closed with it); its size as of now. */
export function fdSource(fd: number): JournalSource {
  let open = true;
  return {
    size: fstatSync(fd).size,
    read: (into, position) => readSync(fd, into, 0, into.length, position),
    text(at, length) {
      if (!open) return undefined;
      const buf = Buffer.allocUnsafe(length);
      let got = 0;
      try {
        while (got < length) {
          const n = readSync(fd, buf, got, length - got, at + got);
          if (n === 0) return undefined;
          got += n;
        }
      } catch {
        return undefined;
      }
      return buf.toString('utf8');
    },
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/** One line of a journal: bytes [start, end) of `buf`, which hold the file's bytes from `base`. */
export interface Line {
  buf: Buffer;
  start: number;
  end: number;
  base: number;
  terminated: boolean;
}

/** Journals are read this much at a time: a load never holds the whole file. */
const CHUNK = 1 << 20;

/** The source's lines, in order, read a chunk at a time (a line longer than a chunk grows it). */
export function* linesOf(source: JournalSource): Generator<Line> {
  let buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(source.size, 1)));
  let filled = 0; // bytes of buf holding file bytes from `base`
  let base = 0;
  let eof = false;
  const line: Line = { buf, start: 0, end: 0, base: 0, terminated: true };
  let pos = 0;
  // One Line object, refilled for each line: the caller reads it before asking for the next.
  const at = (end: number, terminated: boolean): Line => {
    line.buf = buf;
    line.start = pos;
    line.end = end;
    line.base = base;
    line.terminated = terminated;
    return line;
  };
  for (;;) {
    const nl = buf.indexOf(NEWLINE, pos);
    if (nl !== -1 && nl < filled) {
      yield at(nl, true);
      pos = nl + 1;
      continue;
    }
    if (eof) {
      if (pos < filled) yield at(filled, false);
      return;
    }
    // Keep the partial line, and read on after it.
    const rest = filled - pos;
    if (rest === buf.length) {
      const bigger = Buffer.allocUnsafe(buf.length * 2);
      buf.copy(bigger, 0, pos, filled);
      buf = bigger;
    } else buf.copy(buf, 0, pos, filled);
    base += pos;
    pos = 0;
    filled = rest;
    while (filled < buf.length) {
      const n = base + filled >= source.size ? 0 : source.read(buf.subarray(filled), base + filled);
      if (n === 0) {
        eof = true;
        break;
      }
      filled += n;
    }
  }
}

