// What the state journal records per task: the record of its last run, or a
// tombstone once it was destroyed. Every record is validated when it is
// written and again when it is read back, so the planner never works from a
// record whose shape it did not check.

import type { ContentHash, TaskId } from '../ids.ts';

/**
 * The error a record carries when `nodegraph stop` stopped its task (status
 * 'failed', the rest of the record kept): the next apply starts it again, and
 * plan and status say why (plan/decide.ts, cli/status.ts).
 */
export const STOPPED = 'stopped';

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
  /** Upstream task id → the output hash of it that this run consumed. */
  upstream: Record<string, ContentHash>;
  /** Output path → hash after the run. */
  outputs: Record<string, ContentHash>;
  /** Combined hash of the outputs (or a run stamp for tasks without outputs). */
  outputHash: ContentHash;
  edges: { needs: TaskId[]; after: TaskId[] };
  /** Enough to tear the task down without the Nodefile. */
  recipe: { cwd: string; remove: string[]; destroy: string[][]; stop: string[][]; env?: Record<string, string> };
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

const HASH_PREFIX = 'sha256:';
const HASH_LENGTH = HASH_PREFIX.length + 64;
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
  if (!isStringList(recipe.remove)) return fail('recipe.remove', 'expected an array of strings');
  if (!isCommandList(recipe.destroy)) return fail('recipe.destroy', 'expected an array of commands');
  if (!isCommandList(recipe.stop)) return fail('recipe.stop', 'expected an array of commands');
  const hasEnv = 'env' in recipe && recipe.env !== undefined;
  if (hasEnv) {
    const env = recipe.env;
    if (!isObj(env)) return fail('recipe.env', 'expected an object');
    for (const key in env) if (typeof env[key] !== 'string') return fail(`recipe.env.${key}`, 'expected a string');
  }
  if (keys(recipe) !== 4 + ('env' in recipe ? 1 : 0)) return fail('recipe', 'unexpected keys');
  if (typeof value.startedAt !== 'string') return fail('startedAt', 'expected a string');
  const d = value.durationMs;
  if (typeof d !== 'number' || !Number.isFinite(d) || d < 0) return fail('durationMs', 'expected a non-negative number');
  if ('error' in value && value.error !== undefined && typeof value.error !== 'string') return fail('error', 'expected a string');
  if (keys(value) !== 13 + ('error' in value ? 1 : 0)) return fail('(record)', 'unexpected keys');
  return { ok: true, record: value as unknown as TaskRecord };
}

const fail = (path: string, what: string): RecordCheck => ({ ok: false, message: `${path}: ${what}` });
const hashWhat = 'expected sha256:<64 lowercase hex>';
const keys = (o: Obj): number => Object.keys(o).length;
/** A hash as an append checks it: `sha256:` and 64 lowercase hex digits. */
export const isFullHash = (x: unknown): boolean => typeof x === 'string' && x.length === HASH_LENGTH && HEX64.test(x);
const isHashForm = (x: unknown): boolean => typeof x === 'string' && x.length === HASH_LENGTH && x.startsWith(HASH_PREFIX);

function isStringList(x: unknown): boolean {
  if (!Array.isArray(x)) return false;
  for (const s of x) if (typeof s !== 'string') return false;
  return true;
}

function isIdList(x: unknown): boolean {
  if (!Array.isArray(x)) return false;
  for (const s of x) if (typeof s !== 'string' || s === '') return false;
  return true;
}

function isCommandList(x: unknown): boolean {
  if (!Array.isArray(x)) return false;
  for (const c of x) if (!isStringList(c)) return false;
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
    },
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    ...(r.error === undefined ? {} : { error: r.error }),
  };
}
