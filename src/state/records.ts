// The loaded state's records, by task, in dense arrays.
//
// A record line keeps its fixed fields first (record.ts, the line format):
// status, fingerprint, output hash and outputs digest at fixed offsets, then
// the id, then the rest as JSON. The planner decides an unchanged task from the
// fixed fields alone (plan/decide.ts), so a run parses the JSON only of the
// records it reads whole: a task that changed, teardown, status, explain.
//
// Each task has a slot, in the order an eagerly built map would have (first
// appearance; a delete and a new set move a task to the end), so teardown
// orders and listings do not depend on what was read before. A line's fixed
// fields are kept in one buffer, HEAD_LENGTH bytes a slot, as the line has
// them; the rest stays in the file, read (through the load's own fd, which
// keeps the file as loaded) when the record is asked for whole, and kept once
// read. A record this run appended is read back from where it went; one set
// whole (by a caller, or a record the load had to change: a v1 line, one kept
// as 'failed') has no line, and its fields are read off the object.

import { HASH_PREFIX, type ContentHash, type TaskId } from '../ids.ts';
import { decodePayload, DIGEST_AT, HEAD_LENGTH, outputsDigest, type TaskRecord } from './record.ts';
import type { JournalSource } from './lines.ts';
import type { Appended, StateWarning } from './types.ts';

/** What the planner, the executor and the commands read of the state. */
export interface Records {
  readonly size: number;
  has(id: TaskId): boolean;
  /** The task's last record, decoded and checked when first read; undefined once destroyed, or when its line turns out invalid. */
  get(id: TaskId): TaskRecord | undefined;
  /** The record's fixed fields, read without decoding it. */
  status(id: TaskId): 'ok' | 'failed' | undefined;
  /** Whether the task's last line is a tombstone: it ran, and was destroyed (a compaction forgets it). */
  destroyed(id: TaskId): boolean;
  outputHash(id: TaskId): ContentHash | undefined;
  /** Whether the record's fingerprint, or its outputs digest, is `hash`: compared where it lies. */
  holds(id: TaskId, field: 'fingerprint' | 'outputs', hash: ContentHash): boolean;
  /** Task ids in the order their records were first written. */
  keys(): IterableIterator<TaskId>;
  /** Every record, decoded. */
  values(): IterableIterator<TaskRecord>;
  entries(): IterableIterator<[TaskId, TaskRecord]>;
  /** Records found invalid only when something read them: for the user, once. */
  readonly lateWarnings: StateWarning[];
}

const NONE = -1;
const OK = 0x6f; // a line's status byte: `o`

export class RecordTable implements Records {
  readonly #slots = new Map<TaskId, number>();
  /** Ids whose record a tombstone deleted, until one is set again. */
  readonly #destroyed = new Set<TaskId>();
  /** The journal as loaded, which line slots' JSON is read from. */
  readonly #source: JournalSource | undefined;
  /** Per slot: its line's fixed fields (status and digests, as the line has them). */
  #heads = Buffer.alloc(64 * HEAD_LENGTH);
  /** Per slot: where the record's line payload starts (in the journal file) and its length; NONE for a record set whole. */
  #at = new Float64Array(64);
  #length = new Uint32Array(64);
  /** Slots whose line this run appended: read back through #readBack, not from the source. */
  readonly #written = new Set<number>();
  /** Per slot: the record as an object, once read from its line or when set whole. */
  readonly #objects = new Map<number, TaskRecord>();
  #next = 0;
  #readBack: ((where: Appended) => string | undefined) | undefined;
  #decoded = 0;
  readonly lateWarnings: StateWarning[] = [];

  constructor(source?: JournalSource) {
    this.#source = source;
  }

  static of(records: Iterable<TaskRecord>): RecordTable {
    const table = new RecordTable();
    for (const record of records) table.set(record);
    return table;
  }

  /** Sets the task's record to a line of the journal: its payload is bytes [start, start + length) of `buf`, at `at` in the file. */
  setLine(id: TaskId, buf: Buffer, start: number, at: number, length: number): void {
    const slot = this.#slotFor(id);
    buf.copy(this.#heads, slot * HEAD_LENGTH, start, start + HEAD_LENGTH);
    this.#at[slot] = at;
    this.#length[slot] = length;
    this.#objects.delete(slot);
    this.#written.delete(slot);
  }

  /**
   * Sets the task's record to one this run appended where `where` says (its fixed fields as written),
   * read back through `readBack` if asked for whole; a record whose place is not known is kept whole.
   */
  setWritten(record: TaskRecord, where: Appended | undefined, readBack: (where: Appended) => string | undefined): void {
    if (where?.head === undefined) {
      this.set(record);
      return;
    }
    this.#readBack = readBack;
    const slot = this.#slotFor(record.id);
    this.#heads.write(where.head, slot * HEAD_LENGTH, HEAD_LENGTH, 'latin1');
    this.#at[slot] = where.at;
    this.#length[slot] = where.bytes;
    this.#objects.delete(slot);
    this.#written.add(slot);
  }

  set(record: TaskRecord): void {
    const slot = this.#slotFor(record.id);
    this.#at[slot] = NONE;
    this.#written.delete(slot);
    this.#objects.set(slot, record);
  }

  /** Deletes the task's record as a tombstone does: it was destroyed. */
  tombstone(id: TaskId): void {
    this.delete(id);
    this.#destroyed.add(id);
  }

  destroyed(id: TaskId): boolean {
    return this.#destroyed.has(id);
  }

  delete(id: TaskId): boolean {
    const slot = this.#slots.get(id);
    if (slot === undefined) return false;
    this.#slots.delete(id);
    this.#objects.delete(slot);
    this.#written.delete(slot);
    return true;
  }

  /** Lets go of the journal as loaded (its fd). */
  close(): void {
    this.#source?.close();
  }

  get size(): number {
    return this.#slots.size;
  }

  has(id: TaskId): boolean {
    return this.#slots.has(id);
  }

  /** How many records were decoded from their lines. */
  get decoded(): number {
    return this.#decoded;
  }

  /** The task's line as loaded (checksum, space and payload, without its newline), or undefined (appended this run, or set whole). */
  lineBytes(id: TaskId): Buffer | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined || this.#lineAt(slot) < 0 || this.#written.has(slot)) return undefined;
    const text = this.#source?.text(this.#at[slot]! - 9, this.#length[slot]! + 9);
    return text === undefined ? undefined : Buffer.from(text, 'utf8');
  }

  status(id: TaskId): 'ok' | 'failed' | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const head = this.#lineAt(slot);
    if (head < 0) return this.#objects.get(slot)!.status;
    return this.#heads[head] === OK ? 'ok' : 'failed';
  }

  outputHash(id: TaskId): ContentHash | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const head = this.#lineAt(slot);
    if (head < 0) return this.#objects.get(slot)!.outputHash;
    const at = head + DIGEST_AT[1];
    return `sha256:${this.#heads.toString('latin1', at, at + 64)}` as ContentHash;
  }

  holds(id: TaskId, field: 'fingerprint' | 'outputs', hash: ContentHash): boolean {
    const slot = this.#slots.get(id);
    if (slot === undefined) return false;
    const head = this.#lineAt(slot);
    if (head < 0) {
      const record = this.#objects.get(slot)!;
      return (field === 'fingerprint' ? record.fingerprint : outputsDigest(Object.entries(record.outputs))) === hash;
    }
    const bytes = this.#heads;
    const at = head + DIGEST_AT[field === 'fingerprint' ? 0 : 2];
    if (hash.length !== HASH_PREFIX + 64) return false;
    for (let i = 0; i < 64; i++) if (bytes[at + i] !== hash.charCodeAt(HASH_PREFIX + i)) return false;
    return true;
  }

  /** Where the slot's fixed fields start in #heads, or -1 for a record set whole. */
  #lineAt(slot: number): number {
    return this.#at[slot] === NONE ? -1 : slot * HEAD_LENGTH;
  }

  get(id: TaskId): TaskRecord | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const object = this.#objects.get(slot);
    if (object !== undefined) return object;
    const at = this.#at[slot]!;
    const length = this.#length[slot]!;
    // Appended this run: read back from where it went; else a line of the journal as loaded.
    const text = this.#written.has(slot) ? this.#readBack?.({ at, bytes: length }) : this.#source?.text(at, length);
    const record = text === undefined ? undefined : decodePayload(text);
    this.#decoded++;
    if (record !== undefined && record.id === id) {
      this.#objects.set(slot, record);
      return record;
    }
    // Only a writer's bug, or a journal changed under the lock, gets here: its checksum matched.
    this.delete(id);
    this.lateWarnings.push({
      kind: 'distrusted',
      id,
      message: `${id}: its record could not be read${text === undefined ? ' back from the journal' : ' (invalid despite a good checksum)'}; it is treated as never run`,
    });
    return undefined;
  }

  *keys(): IterableIterator<TaskId> {
    yield* [...this.#slots.keys()];
  }

  *values(): IterableIterator<TaskRecord> {
    for (const [, record] of this.entries()) yield record;
  }

  *entries(): IterableIterator<[TaskId, TaskRecord]> {
    for (const id of [...this.#slots.keys()]) {
      const record = this.get(id);
      if (record !== undefined) yield [id, record];
    }
  }

  [Symbol.iterator](): IterableIterator<[TaskId, TaskRecord]> {
    return this.entries();
  }

  #slotFor(id: TaskId): number {
    const known = this.#slots.get(id);
    if (known !== undefined) return known;
    if (this.#destroyed.size > 0) this.#destroyed.delete(id);
    const slot = this.#next++;
    if (slot === this.#at.length) {
      const at = new Float64Array(slot * 2);
      at.set(this.#at);
      this.#at = at;
      const length = new Uint32Array(slot * 2);
      length.set(this.#length);
      this.#length = length;
    }
    if (slot * HEAD_LENGTH === this.#heads.length) {
      const heads = Buffer.alloc(this.#heads.length * 2);
      this.#heads.copy(heads);
      this.#heads = heads;
    }
    this.#slots.set(id, slot);
    return slot;
  }
}
