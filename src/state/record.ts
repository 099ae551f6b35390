// What the state journal records per task: the record of its last run, or a
// tombstone once it was destroyed. Every record is validated when it is
// written and again when it is read back, so the planner never works from a
// record whose shape it did not check.

import { contentHash, HASH_PREFIX, type ContentHash, type TaskId } from '../ids.ts';
import { outputsDigest } from '../hash/value.ts';
import type { Json } from '../types.ts';
import { isTimeout } from '../util/duration.ts';
import { isStrings } from '../util/guards.ts';

export { outputsDigest };

/** The longest canonical JSON of a value input that a record keeps (to show its change key by key). */
export const VALUE_RECORDED_MAX = 4096;

/** The record format version, stored in every record as `v`. */
export const RECORD_VERSION = 1;

/** The record of one task's last run. */
export interface TaskRecord {
  v: 1;
  id: TaskId;
  status: 'ok' | 'failed';
  /** Hash of definition + all input hashes + upstream output hashes. */
  fingerprint: ContentHash;
  definition: ContentHash;
  /** Input name → hash. */
  inputs: Record<string, ContentHash>;
  /**
   * Value input name → its JSON as applied, so a plan can say what changed key
   * by key. Only values that are not sensitive and at most VALUE_RECORDED_MAX
   * characters of canonical JSON; absent when there are none.
   */
  values?: Record<string, Json>;
  /** Upstream task id → the output hash of it that this run consumed. */
  upstream: Record<string, ContentHash>;
  /** Output path → hash after the run. */
  outputs: Record<string, ContentHash>;
  /** Combined hash of the outputs (or a run stamp for tasks without outputs). */
  outputHash: ContentHash;
  edges: { needs: TaskId[]; after: TaskId[] };
  /** Enough to tear the task down without the Nodefile. */
  recipe: { cwd: string; remove: string[]; destroy: string[][]; stop: string[][]; env?: Record<string, string>; retire?: 'stop'; timeout?: string };
  startedAt: string;
  durationMs: number;
  error?: string;
}

/** Written when a task was destroyed: replaying it removes the task's record. */
export interface TaskTombstone {
  v: 1;
  id: TaskId;
  deleted: true;
}

export type StoredRecord = TaskRecord | TaskTombstone;

export const isTombstone = (record: StoredRecord): record is TaskTombstone => 'deleted' in record;

// Validation is hand-written rather than a zod schema: loading 50,000
// records must take milliseconds, and a schema library costs tens of
// microseconds per record. The checks are the same either way: exact keys,
// exact types.

export type RecordCheck = { ok: true; record: StoredRecord } | { ok: false; message: string };

const HASH_TAG = 'sha256:';
const HASH_LENGTH = HASH_TAG.length + 64;
const HEX64 = /^sha256:[0-9a-f]{64}$/;

type Obj = Record<string, unknown>;
const isObj = (x: unknown): x is Obj => typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * Checks a parsed value is a well-formed record of this format version.
 * Pure; never throws; returns the value itself (no copy) when it is valid.
 *
 * `fullHashes` also checks every hash is 64 lowercase hex digits. Appends
 * check fully; loads check the `sha256:` form and length only, which is
 * enough for safety — the line's CRC already proves these are the bytes a
 * fully checked append wrote, and a malformed hash could only compare unequal
 * (a re-run) — and keeps a 50,000-record load fast.
 */
export function checkRecord(value: unknown, fullHashes = true): RecordCheck {
  if (!isObj(value)) return fail('(record)', 'not an object');
  if (value.v !== RECORD_VERSION) return fail('v', `expected ${RECORD_VERSION}`);
  if (typeof value.id !== 'string' || value.id === '') return fail('id', 'expected a non-empty string');
  const isHash = fullHashes ? isFullHash : isHashForm;

  if ('deleted' in value) {
    if (value.deleted !== true) return fail('deleted', 'expected true');
    if (keys(value) !== 3) return fail('(record)', 'unexpected keys in a tombstone');
    return { ok: true, record: value as unknown as TaskTombstone };
  }

  if (value.status !== 'ok' && value.status !== 'failed') return fail('status', "expected 'ok' or 'failed'");
  for (const field of ['fingerprint', 'definition', 'outputHash'] as const) {
    if (!isHash(value[field])) return fail(field, hashWhat);
  }
  for (const field of ['inputs', 'upstream', 'outputs'] as const) {
    const map = value[field];
    if (!isObj(map)) return fail(field, 'expected an object');
    for (const key in map) if (!isHash(map[key])) return fail(`${field}.${key}`, hashWhat);
  }
  const edges = value.edges;
  if (!isObj(edges) || keys(edges) !== 2) return fail('edges', 'expected { needs, after }');
  if (!isIdList(edges.needs)) return fail('edges.needs', 'expected an array of task ids');
  if (!isIdList(edges.after)) return fail('edges.after', 'expected an array of task ids');
  const recipe = value.recipe;
  if (!isObj(recipe)) return fail('recipe', 'expected an object');
  if (typeof recipe.cwd !== 'string') return fail('recipe.cwd', 'expected a string');
  if (!isStrings(recipe.remove)) return fail('recipe.remove', 'expected an array of strings');
  if (!isCommandList(recipe.destroy)) return fail('recipe.destroy', 'expected an array of commands');
  if (!isCommandList(recipe.stop)) return fail('recipe.stop', 'expected an array of commands');
  const hasEnv = 'env' in recipe && recipe.env !== undefined;
  if (hasEnv) {
    const env = recipe.env;
    if (!isObj(env)) return fail('recipe.env', 'expected an object');
    for (const key in env) if (typeof env[key] !== 'string') return fail(`recipe.env.${key}`, 'expected a string');
  }
  const hasRetire = 'retire' in recipe;
  if (hasRetire && recipe.retire !== 'stop') return fail('recipe.retire', "expected 'stop'");
  const hasTimeout = 'timeout' in recipe;
  if (hasTimeout && !isTimeout(recipe.timeout)) return fail('recipe.timeout', "expected a duration: '30s'");
  if (keys(recipe) !== 4 + ('env' in recipe ? 1 : 0) + (hasRetire ? 1 : 0) + (hasTimeout ? 1 : 0)) return fail('recipe', 'unexpected keys');
  if (typeof value.startedAt !== 'string') return fail('startedAt', 'expected a string');
  const d = value.durationMs;
  if (typeof d !== 'number' || !Number.isFinite(d) || d < 0) return fail('durationMs', 'expected a non-negative number');
  if ('error' in value && value.error !== undefined && typeof value.error !== 'string') return fail('error', 'expected a string');
  if ('values' in value && !isObj(value.values)) return fail('values', 'expected an object');
  if (keys(value) !== 13 + ('error' in value ? 1 : 0) + ('values' in value ? 1 : 0)) return fail('(record)', 'unexpected keys');
  return { ok: true, record: value as unknown as TaskRecord };
}

const fail = (path: string, what: string): RecordCheck => ({ ok: false, message: `${path}: ${what}` });
const hashWhat = 'expected sha256:<64 lowercase hex>';
const keys = (o: Obj): number => Object.keys(o).length;
/** A hash as an append checks it: `sha256:` and 64 lowercase hex digits. */
export const isFullHash = (x: unknown): boolean => typeof x === 'string' && x.length === HASH_LENGTH && HEX64.test(x);
const isHashForm = (x: unknown): boolean => typeof x === 'string' && x.length === HASH_LENGTH && x.startsWith(HASH_TAG);

function isIdList(x: unknown): boolean {
  if (!Array.isArray(x)) return false;
  for (const s of x) if (typeof s !== 'string' || s === '') return false;
  return true;
}

function isCommandList(x: unknown): boolean {
  if (!Array.isArray(x)) return false;
  for (const c of x) if (!isStrings(c)) return false;
  return true;
}

/**
 * Validates a record for append (fully) and returns its canonical copy;
 * throws on a malformed one, which is a bug in the caller.
 */
export function validForAppend(record: StoredRecord): StoredRecord {
  const check = checkRecord(record, true);
  if (!check.ok) {
    const id = typeof record === 'object' && record !== null ? String((record as { id?: unknown }).id) : '?';
    throw new TypeError(`refusing to record an invalid state record for ${id}: ${check.message}`);
  }
  return canonical(check.record);
}

/**
 * The record as it is written: keys in a fixed order with `v` and `id`
 * first (the loader reads the id of a line without parsing all of it), and
 * a fresh copy, so later mutation by the caller cannot reach the journal.
 */
export function canonical(record: StoredRecord): StoredRecord {
  if (isTombstone(record)) return { v: 1, id: record.id, deleted: true };
  const r = record;
  const { env } = r.recipe;
  return {
    v: 1,
    id: r.id,
    status: r.status,
    fingerprint: r.fingerprint,
    definition: r.definition,
    inputs: { ...r.inputs },
    ...(r.values === undefined ? {} : { values: structuredClone(r.values) }),
    upstream: { ...r.upstream },
    outputs: { ...r.outputs },
    outputHash: r.outputHash,
    edges: { needs: [...r.edges.needs], after: [...r.edges.after] },
    recipe: {
      cwd: r.recipe.cwd,
      remove: [...r.recipe.remove],
      destroy: r.recipe.destroy.map((c) => [...c]),
      stop: r.recipe.stop.map((c) => [...c]),
      ...(env === undefined ? {} : { env: { ...env } }),
      ...(r.recipe.retire === undefined ? {} : { retire: r.recipe.retire }),
      ...(r.recipe.timeout === undefined ? {} : { timeout: r.recipe.timeout }),
    },
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    ...(r.error === undefined ? {} : { error: r.error }),
  };
}

// The line format. A record's line payload is its fixed fields, then its id,
// then the rest as JSON:
//
//   o <fingerprint> <outputHash> <outputs digest> <id> {"definition":…}
//   x <id>                                                  (a tombstone)
//
// `o` (ok) or `f` (failed), then three digests as 64 hex digits each, at fixed
// offsets: a load checks the line's framing, not its JSON, and the planner
// decides an unchanged task from these alone (plan/decide.ts). The digests stay
// hex so that the journal is a text file one can read; an id has no white space
// (nodefile/plain.ts, ID_PATTERN). A v1 line is one JSON object; a load still
// reads one, and the first append rewrites the journal in this form.

/** Where the id starts in a record's payload: the kind, and three digests each after a space, and a space. */
export const HEAD_LENGTH = 1 + 3 * 65 + 1;
/** Where each digest's 64 hex digits start in a payload: fingerprint, output hash, outputs digest. */
export const DIGEST_AT = [2, 67, 132] as const;

/** A record's fixed fields as its line has them: HEAD_LENGTH characters, up to its id. */
export function headText(r: TaskRecord): string {
  return `${r.status === 'ok' ? 'o' : 'f'} ${r.fingerprint.slice(HASH_PREFIX)} ${r.outputHash.slice(HASH_PREFIX)} ${outputsDigest(Object.entries(r.outputs)).slice(HASH_PREFIX)} `;
}

const OK = 0x6f; // o
const FAILED = 0x66; // f
const TOMBSTONE = 0x78; // x
const SPACE = 0x20;
const JSON_START = 0x7b; // `{`: a record's JSON follows its id

/** A record line's payload as it is written; the record is checked first (validForAppend). */
export function encodePayload(record: StoredRecord): string {
  if (/\s/.test(record.id)) throw new TypeError(`refusing to record a task id with white space: ${JSON.stringify(record.id)}`);
  if (isTombstone(record)) return `x ${record.id}`;
  const r = record;
  const detail = {
    definition: r.definition,
    inputs: r.inputs,
    ...(r.values === undefined ? {} : { values: r.values }),
    upstream: r.upstream,
    outputs: r.outputs,
    edges: r.edges,
    recipe: r.recipe,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    ...(r.error === undefined ? {} : { error: r.error }),
  };
  return `${headText(r)}${r.id} ${JSON.stringify(detail)}`;
}

/** What kind of line a payload is, from its framing alone: the id, and whether it is a record or a tombstone; undefined when it is neither. */
export function lineKind(buf: Uint8Array, start: number, end: number): { kind: 'record' | 'tombstone'; idStart: number; idEnd: number } | undefined {
  const first = buf[start];
  if (first === TOMBSTONE) {
    if (end - start < 3 || buf[start + 1] !== SPACE) return undefined;
    for (let i = start + 2; i < end; i++) if (buf[i]! <= SPACE) return undefined;
    return { kind: 'tombstone', idStart: start + 2, idEnd: end };
  }
  if (first !== OK && first !== FAILED) return undefined;
  if (end - start < HEAD_LENGTH + 3) return undefined;
  for (const at of DIGEST_AT) if (buf[start + at - 1] !== SPACE) return undefined;
  if (buf[start + HEAD_LENGTH - 1] !== SPACE) return undefined;
  let idEnd = start + HEAD_LENGTH;
  while (idEnd < end && buf[idEnd]! > SPACE) idEnd++;
  if (idEnd === start + HEAD_LENGTH || buf[idEnd] !== SPACE || buf[idEnd + 1] !== JSON_START) return undefined;
  return { kind: 'record', idStart: start + HEAD_LENGTH, idEnd };
}

const HEX = /^[0-9a-f]{64}$/;

/** The record a payload holds, checked as an append checks it (but for full hashes); undefined when it is not a valid record line. */
export function decodePayload(payload: string): TaskRecord | undefined {
  const bytes = Buffer.from(payload, 'latin1');
  const line = lineKind(bytes, 0, bytes.length);
  if (line?.kind !== 'record') return undefined;
  const digests = DIGEST_AT.map((at) => payload.slice(at, at + 64));
  if (!digests.every((d) => HEX.test(d))) return undefined;
  let detail: unknown;
  try {
    detail = JSON.parse(payload.slice(line.idEnd + 1));
  } catch {
    return undefined;
  }
  if (typeof detail !== 'object' || detail === null || Array.isArray(detail)) return undefined;
  // The fixed fields are not to be overridden by the JSON; checkRecord counts every other key.
  if ('outputHash' in detail || 'fingerprint' in detail || 'status' in detail || 'id' in detail || 'v' in detail) return undefined;
  const record = {
    v: 1,
    id: payload.slice(line.idStart, line.idEnd),
    status: payload.charCodeAt(0) === OK ? 'ok' : 'failed',
    fingerprint: contentHash(digests[0]!),
    outputHash: contentHash(digests[1]!),
    ...(detail as Record<string, unknown>),
  };
  const check = checkRecord(record, false);
  return check.ok && !isTombstone(check.record) ? check.record : undefined;
}
