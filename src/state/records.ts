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
// orders and listings do not depend on what was read before. A slot's record
// is in one of three places: a line of the journal as loaded (an offset into
// its bytes), a line this run appended (an offset into the file, read back
// when asked for, its fixed fields kept), or an object (set by a caller, or
// a record the load had to change: a v1 line, one kept as 'failed').

import { HASH_PREFIX, type ContentHash, type TaskId } from '../ids.ts';
import { decodePayload, DIGEST_AT, HEAD_LENGTH, headOfLine, headOfRecord, type RecordHead, type TaskRecord } from './record.ts';
import type { Appended, StateWarning } from './store.ts';

/** What the planner, the executor and the commands read of the state. */
export interface Records {
  readonly size: number;
  has(id: TaskId): boolean;
  /** The task's last record, decoded and checked when first read; undefined once destroyed, or when its line turns out invalid. */
  get(id: TaskId): TaskRecord | undefined;
  /** The record's fixed fields, read without decoding it (the accessors below, without making them all). */
  head(id: TaskId): RecordHead | undefined;
  status(id: TaskId): 'ok' | 'failed' | undefined;
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
  /** The journal's bytes as loaded: offsets below its length point into it. */
  #loaded: Buffer = Buffer.alloc(0);
  /** Per slot: where the record's line payload starts (in the journal file) and its length; NONE for an object. */
  #at = new Float64Array(64);
  #length = new Uint32Array(64);
  /** Per slot appended this run: its head, kept so that dependents need not read the line back. */
  readonly #heads = new Map<number, RecordHead>();
  /** Per slot: the record as an object, once decoded or when set as one. */
  readonly #objects = new Map<number, TaskRecord>();
  #next = 0;
  #readBack: ((where: Appended) => string | undefined) | undefined;
  #decoded = 0;
  readonly lateWarnings: StateWarning[] = [];

  static of(records: Iterable<TaskRecord>): RecordTable {
    const table = new RecordTable();
    for (const record of records) table.set(record);
    return table;
  }

  /** The journal's bytes, which `setLine` offsets point into. */
  useBytes(bytes: Buffer): void {
    this.#loaded = bytes;
  }

  /** Sets the task's record to the line payload at `at` (`length` bytes) of the loaded journal. */
  setLine(id: TaskId, at: number, length: number): void {
    const slot = this.#slotFor(id);
    this.#at[slot] = at;
    this.#length[slot] = length;
    this.#objects.delete(slot);
  }

  /** Sets the task's record to one this run appended where `where` says, read back through `readBack` if asked for whole. */
  setWritten(record: TaskRecord, where: Appended, readBack: (where: Appended) => string | undefined): void {
    this.#readBack = readBack;
    const slot = this.#slotFor(record.id);
    this.#at[slot] = where.at;
    this.#length[slot] = where.bytes;
    this.#objects.delete(slot);
    this.#heads.set(slot, headOfRecord(record));
  }

  set(record: TaskRecord): void {
    const slot = this.#slotFor(record.id);
    this.#at[slot] = NONE;
    this.#heads.delete(slot);
    this.#objects.set(slot, record);
  }

  delete(id: TaskId): boolean {
    const slot = this.#slots.get(id);
    if (slot === undefined) return false;
    this.#slots.delete(id);
    this.#objects.delete(slot);
    this.#heads.delete(slot);
    return true;
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

  /** Where the task's record line lies in the journal as loaded, or undefined (appended this run, or an object). */
  lineOf(id: TaskId): { readonly at: number; readonly length: number } | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined || this.#objects.has(slot) || this.#heads.has(slot) || this.#at[slot]! === NONE) return undefined;
    return { at: this.#at[slot]!, length: this.#length[slot]! };
  }

  head(id: TaskId): RecordHead | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const object = this.#objects.get(slot);
    if (object !== undefined) return headOfRecord(object);
    const kept = this.#heads.get(slot);
    if (kept !== undefined) return kept;
    const at = this.#at[slot]!;
    // A line of the loaded journal: its head was checked as it loaded.
    return headOfLine(this.#loaded.toString('latin1', at, at + HEAD_LENGTH));
  }

  status(id: TaskId): 'ok' | 'failed' | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const line = this.#lineAt(slot);
    if (line < 0) return this.#headOf(slot).status;
    return this.#loaded[line] === OK ? 'ok' : 'failed';
  }

  outputHash(id: TaskId): ContentHash | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const line = this.#lineAt(slot);
    if (line < 0) return this.#headOf(slot).outputHash;
    const at = line + DIGEST_AT[1];
    return `sha256:${this.#loaded.toString('latin1', at, at + 64)}` as ContentHash;
  }

  holds(id: TaskId, field: 'fingerprint' | 'outputs', hash: ContentHash): boolean {
    const slot = this.#slots.get(id);
    if (slot === undefined) return false;
    const line = this.#lineAt(slot);
    if (line < 0) return this.#headOf(slot)[field] === hash;
    const bytes = this.#loaded;
    const at = line + DIGEST_AT[field === 'fingerprint' ? 0 : 2];
    if (hash.length !== HASH_PREFIX + 64) return false;
    for (let i = 0; i < 64; i++) if (bytes[at + i] !== hash.charCodeAt(HASH_PREFIX + i)) return false;
    return true;
  }

  /** Where the slot's line starts in the loaded bytes, or -1 for a record kept otherwise (appended, or an object). */
  #lineAt(slot: number): number {
    return this.#objects.has(slot) || this.#heads.has(slot) ? -1 : this.#at[slot]!;
  }

  /** The head of a slot kept otherwise than as a loaded line. */
  #headOf(slot: number): RecordHead {
    return this.#heads.get(slot) ?? headOfRecord(this.#objects.get(slot)!);
  }

  get(id: TaskId): TaskRecord | undefined {
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    const object = this.#objects.get(slot);
    if (object !== undefined) return object;
    const at = this.#at[slot]!;
    const length = this.#length[slot]!;
    // Appended this run (its head kept): in the file, read back; else a line of the journal as loaded.
    const text = this.#heads.has(slot) ? this.#readBack?.({ at, bytes: length }) : this.#loaded.toString('utf8', at, at + length);
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
    const slot = this.#next++;
    if (slot === this.#at.length) {
      const at = new Float64Array(slot * 2);
      at.set(this.#at);
      this.#at = at;
      const length = new Uint32Array(slot * 2);
      length.set(this.#length);
      this.#length = length;
    }
    this.#slots.set(id, slot);
    return slot;
  }
}

