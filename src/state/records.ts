// The loaded state's records, decoded when first read.
//
// A no-op reads nothing of most records: the planner compares a record's
// text with the text that would be recorded for what it observed now
// (plan/unchanged.ts), and a match is an unchanged task. So the journal keeps
// the checksummed JSON text of each plain `ok` record and parses it only when
// something asks for the record itself: a task that changed, teardown,
// status, a compaction. At 50,000 tasks that spares parsing 45 MB into half a
// million objects (about 0.45 s and 75 MiB of heap).
//
// Validation is the same as an eager load's, only later: a text that does not
// parse into a valid record is handled as a dropped line would have been at
// load. The task's previous good record, if the journal still has one, is kept
// as 'failed' (it re-runs); otherwise the task counts as never run. Only a
// writer's bug can produce such a line, since its checksum matched.
//
// A run keeps what it appends the same way, only more so: where the record's
// line lies in the journal and the two fields the rest of the run reads (its
// status and output hash), not the record (RecordMap.setWritten). A
// 50,000-task build appends 50,000 records and reads back none of them; as
// objects they were a quarter of its heap. One that is read after all (the
// second look of a run planned from the seal) is read back and checked as a
// load checks a line.

import { type ContentHash, contentHash, HASH_PREFIX, type TaskId } from '../ids.ts';
import { checkRecord, isFullHash, isTombstone, type TaskRecord } from './record.ts';
import type { Appended, StateWarning } from './store.ts';

/** A record's text as the journal holds it, with its line. */
class Pending {
  readonly text: string;
  readonly line: number;
  /**
   * The task's newest earlier record that is valid, if any: what an eager load
   * falls back to (as 'failed') when this text turns out invalid.
   */
  readonly fallback: TaskRecord | undefined;
  constructor(text: string, line: number, fallback: TaskRecord | undefined) {
    this.text = text;
    this.line = line;
    this.fallback = fallback;
  }
}

/**
 * The records this run appended, kept as where each one's text went
 * (StateStore.append) with the two fields the rest of the run asks of it: a
 * 50,000-task build keeps 50,000 records, about 1.2 KB each as objects, and
 * reads back none. One is a number, its index here (what the map of slots
 * holds for it): its place, size, status and digest lie in typed arrays, 45
 * bytes, where an object and its 71-character hash string were 144 (7 MB at 50,000).
 */
class WrittenRecords {
  #at = new Float64Array(0);
  #bytes = new Uint32Array(0);
  #ok = new Uint8Array(0);
  #digests = Buffer.alloc(0);
  #count = 0;
  /** An output hash not of the full form (none this run's executor makes), by index: kept as it is. */
  #unusual: Map<number, ContentHash> | undefined;

  /** Makes room for `n` more at once (a build knows how many tasks it may run): no room left over from doubling. */
  reserve(n: number): void {
    if (this.#count + n > this.#ok.length) this.#grow(this.#count + n);
  }

  add(record: TaskRecord, where: Appended): number {
    const i = this.#count++;
    if (i === this.#ok.length) this.#grow(Math.max(64, 2 * i));
    this.#at[i] = where.at;
    this.#bytes[i] = where.bytes;
    this.#ok[i] = record.status === 'ok' ? 1 : 0;
    if (isFullHash(record.outputHash)) this.#digests.write(record.outputHash.slice(HASH_PREFIX), 32 * i, 32, 'hex');
    else (this.#unusual ??= new Map()).set(i, record.outputHash);
    return i;
  }

  isOk(i: number): boolean {
    return this.#ok[i] === 1;
  }

  outputHash(i: number): ContentHash {
    return this.#unusual?.get(i) ?? contentHash(this.#digests.toString('hex', 32 * i, 32 * i + 32));
  }

  where(i: number): Appended {
    return { at: this.#at[i]!, bytes: this.#bytes[i]! };
  }

  #grow(capacity: number): void {
    const at = new Float64Array(capacity);
    at.set(this.#at);
    this.#at = at;
    const bytes = new Uint32Array(capacity);
    bytes.set(this.#bytes);
    this.#bytes = bytes;
    const ok = new Uint8Array(capacity);
    ok.set(this.#ok);
    this.#ok = ok;
    const digests = Buffer.alloc(32 * capacity);
    this.#digests.copy(digests);
    this.#digests = digests;
  }
}

/**
 * A Map of task id → record that decodes a record's text when it is first
 * read. Everything lives in one map of slots, in the order an eagerly decoded
 * map would have (first appearance; a delete and a new set move a task to
 * the end), so teardown orders and listings do not depend on what was read
 * before. The Map it extends holds nothing: every method is its own.
 */
export class RecordMap extends Map<TaskId, TaskRecord> {
  /** A number is a record this run wrote: its index in #written. */
  readonly #slots = new Map<TaskId, TaskRecord | Pending | number>();
  readonly #written = new WrittenRecords();
  /** Reads a written record's text back (StateStore.readBack); set with `setWritten`. */
  #readBack: ((where: Appended) => string | undefined) | undefined;
  #pending = 0;
  #decoded = 0;
  #readBacks = 0;
  /** Warnings about texts found invalid when decoded (see above). */
  readonly lateWarnings: StateWarning[] = [];

  /**
   * Keeps a record's text, to decode when it is first read. Replaces what the
   * map had for the id. A text this replaces is checked now (a journal that
   * was not compacted has such lines), so that what a bad newer text falls
   * back to is known without keeping every older line.
   */
  setText(id: TaskId, text: string, line: number): void {
    const before = this.#slots.get(id);
    let fallback: TaskRecord | undefined;
    if (before instanceof Pending) {
      this.#pending--;
      fallback = parseRecord(before.text);
      if (fallback === undefined) {
        this.#invalid(id, before.line);
        fallback = before.fallback;
      }
    } else fallback = typeof before === 'number' ? this.#readWritten(id, before) : before;
    this.#slots.set(id, new Pending(text, line, fallback));
    this.#pending++;
  }

  /**
   * Keeps a record the store just appended as where it went: `get` reads it
   * back (checksum, id and shape checked as a load checks them); `isOk` and
   * `okOutputHash` answer without reading.
   */
  setWritten(record: TaskRecord, where: Appended, readBack: (where: Appended) => string | undefined): void {
    this.#readBack = readBack;
    if (this.#slots.get(record.id) instanceof Pending) this.#pending--;
    this.#slots.set(record.id, this.#written.add(record, where));
  }

  /** Makes room for `n` more records kept as where they were written. */
  reserveWritten(n: number): void {
    this.#written.reserve(n);
  }

  /** The output hash of the task's record when it says it ran successfully, read as `get` would (a written record is not read back). */
  okOutputHash(id: TaskId): ContentHash | undefined {
    const slot = this.#slots.get(id);
    if (typeof slot === 'number') return this.#written.isOk(slot) ? this.#written.outputHash(slot) : undefined;
    const record = slot instanceof Pending ? this.#decode(id, slot) : slot;
    return record?.status === 'ok' ? record.outputHash : undefined;
  }

  /** The text of a record not decoded yet: an `ok` record as the journal wrote it. */
  textOf(id: TaskId): string | undefined {
    const slot = this.#slots.get(id);
    return slot instanceof Pending ? slot.text : undefined;
  }

  /** Whether the task's record says it ran successfully, without decoding it. */
  isOk(id: TaskId): boolean {
    const slot = this.#slots.get(id);
    return slot instanceof Pending || (typeof slot === 'number' ? this.#written.isOk(slot) : slot?.status === 'ok');
  }

  /** How many written records were read back. */
  get readBacks(): number {
    return this.#readBacks;
  }

  /** How many records are kept as where they were written. */
  get written(): number {
    let n = 0;
    for (const slot of this.#slots.values()) if (typeof slot === 'number') n++;
    return n;
  }

  /** How many records are still text. */
  get undecoded(): number {
    return this.#pending;
  }

  /** How many texts were decoded since the load. */
  get decoded(): number {
    return this.#decoded;
  }

  override get(id: TaskId): TaskRecord | undefined {
    const slot = this.#slots.get(id);
    return slot instanceof Pending ? this.#decode(id, slot) : typeof slot === 'number' ? this.#readWritten(id, slot) : slot;
  }

  override has(id: TaskId): boolean {
    return this.#slots.has(id);
  }

  override get size(): number {
    return this.#slots.size;
  }

  override set(id: TaskId, record: TaskRecord): this {
    if (this.#slots.get(id) instanceof Pending) this.#pending--;
    this.#slots.set(id, record);
    return this;
  }

  override delete(id: TaskId): boolean {
    if (this.#slots.get(id) instanceof Pending) this.#pending--;
    return this.#slots.delete(id);
  }

  override clear(): void {
    this.#slots.clear();
    this.#pending = 0;
  }

  override *keys(): MapIterator<TaskId> {
    for (const [id] of this.entries()) yield id;
  }

  override *values(): MapIterator<TaskRecord> {
    for (const [, record] of this.entries()) yield record;
  }

  override *entries(): MapIterator<[TaskId, TaskRecord]> {
    this.#decodeAll();
    for (const [id, slot] of this.#slots) yield [id, slot as TaskRecord];
  }

  override [Symbol.iterator](): MapIterator<[TaskId, TaskRecord]> {
    return this.entries();
  }

  override forEach(callback: (value: TaskRecord, key: TaskId, map: Map<TaskId, TaskRecord>) => void, thisArg?: unknown): void {
    for (const [id, record] of this.entries()) callback.call(thisArg, record, id, this);
  }

  #invalid(id: TaskId, line: number): void {
    this.lateWarnings.push({ kind: 'invalid-record', line, id, message: `line ${line}: invalid record despite a good checksum (apparently for ${id}); dropped` });
  }

  #decodeAll(): void {
    if (this.#pending === 0 && this.#readBack === undefined) return;
    for (const [id, slot] of [...this.#slots]) {
      if (slot instanceof Pending) this.#decode(id, slot);
      else if (typeof slot === 'number') this.#readWritten(id, slot);
    }
  }

  /**
   * A written record read back. One that is not there as written (the disk
   * lost it, or a compaction moved it) is not trusted: the task counts as
   * never run in this process, and it is said. The journal is what the next
   * run loads, and it decides from that.
   */
  #readWritten(id: TaskId, written: number): TaskRecord | undefined {
    this.#readBacks++;
    const text = this.#readBack?.(this.#written.where(written));
    const record = text === undefined ? undefined : parseRecord(text);
    if (record !== undefined && record.id === id) {
      this.#slots.set(id, record);
      return record;
    }
    this.#slots.delete(id);
    this.lateWarnings.push({
      kind: 'distrusted',
      id,
      message: `${id}: the record this run wrote could not be read back from the journal; it is treated as never run here`,
    });
    return undefined;
  }

  #decode(id: TaskId, pending: Pending): TaskRecord | undefined {
    this.#pending--;
    this.#decoded++;
    const record = parseRecord(pending.text);
    if (record !== undefined) {
      this.#slots.set(id, record);
      return record;
    }
    const line = pending.line;
    this.#invalid(id, line);
    const previous = pending.fallback;
    if (previous !== undefined) {
      const failed: TaskRecord = { ...previous, status: 'failed', error: `state record lost (journal line ${line} was unreadable); the task must run again` };
      this.#slots.set(id, failed);
      this.lateWarnings.push({ kind: 'distrusted', id, line, message: `${id}: its newest record (line ${line}) was lost; its previous record is kept as 'failed' so it runs again` });
      return failed;
    }
    this.#slots.delete(id);
    this.lateWarnings.push({
      kind: 'distrusted',
      id,
      line,
      message: `${id}: its newest record (line ${line}) was lost and there is no earlier record to fall back on; it is treated as never run`,
    });
    return undefined;
  }
}

/** A record's text decoded and checked as a load checks it; undefined when it is not a valid live record. */
export function parseRecord(text: string): TaskRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const check = checkRecord(value, false);
  return check.ok && !isTombstone(check.record) ? check.record : undefined;
}
