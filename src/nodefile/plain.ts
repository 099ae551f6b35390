// The common shapes of a declaration, recognised without zod: a graph of
// 50,000 tasks must load in well under a second, and zod alone takes a tenth
// of one to import. Whatever is not plainly valid goes to schema.ts, which
// has the last word and the messages. A property test holds plainlyValid to
// never accepting what the schema rejects.

import { isTimeout } from '../util/duration.ts';

/** One word of an id. Never `.` or `..`: `a/../b` would read as the path `b`, and `a/*` would select it. */
const ID_WORD = String.raw`(?!\.\.?(?:/|$))[A-Za-z0-9_.:@+-]+`;
export const ID_PATTERN = new RegExp(`^${ID_WORD}(?:/${ID_WORD})*$`);
export const ID_MESSAGE = 'a task id is words of [A-Za-z0-9_.:@+-] joined by "/", none of them "." or "..", e.g. kube1/containerd.config';

/** The fields of a task spec: kept equal to schema.ts's taskSpecSchema (a unit test checks). */
export const SPEC_KEYS: ReadonlySet<string> = new Set([
  'description', 'inputs', 'outputs', 'after', 'run', 'version', 'cwd', 'env', 'check', 'timeout', 'stop', 'destroy', 'removeOutputs', 'retire', 'pool', 'verbs', 'health',
]);
const isArgv = (v: unknown): boolean =>
  Array.isArray(v) && v.length > 0 && typeof v[0] === 'string' && v[0].trim() !== '' && v.every((a) => typeof a === 'string');
const isPath = (v: unknown): boolean => typeof v === 'string' && v.length > 0;
const NAME = /^[A-Za-z0-9_.-]+$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A name a command's environment can hold: not empty, no `=` (which would end the name) and no NUL. */
export const COMMAND_ENV_NAME = /^[^=\0]+$/;
/** A verb the plan shows (TaskSpec.verbs): a word or a few, on one line, no blank at either end. */
export const VERB = /^[^\s\0-\x1f\x7f](?:[^\0-\x1f\x7f]*[^\s\0-\x1f\x7f])?$/;
/** Deeper values are left to the schema (which also meets a cycle there). */
const MAX_DEPTH = 32;

/**
 * JSON as the schema means it: null, a boolean, a finite number, a string, an
 * array or a plain object of such. Anything unusual — a class instance, a
 * symbol key, a sparse array, great depth — is left to the schema.
 */
function isJson(v: unknown, depth: number): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (typeof v !== 'object' || depth >= MAX_DEPTH) return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!Object.hasOwn(v, i) || !isJson(v[i], depth + 1)) return false;
    return true;
  }
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key of Reflect.ownKeys(v)) {
    if (typeof key !== 'string' || !isJson((v as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/** True only for a spec the schema accepts; false means: ask the schema. */
export function plainlyValid(spec: Record<string, unknown>): boolean {
  for (const key in spec) if (!SPEC_KEYS.has(key)) return false;
  const run = spec['run'];
  if (typeof run !== 'function' && !isCommand(run)) return false;
  const outputs = spec['outputs'];
  if (outputs !== undefined && !(Array.isArray(outputs) && outputs.every(isPath))) return false;
  const inputs = spec['inputs'];
  if (inputs !== undefined) {
    if (typeof inputs !== 'object' || inputs === null || Array.isArray(inputs)) return false;
    for (const name in inputs) {
      if (!NAME.test(name)) return false;
      const input = (inputs as Record<string, unknown>)[name] as Record<string, unknown> | null;
      if (typeof input !== 'object' || input === null) return false;
      const kind = input['kind'];
      if (kind === 'file' || kind === 'tree') {
        if (!isPath(input['path'])) return false;
      } else if (kind === 'task') {
        if (!isPath(input['id']) || (input['path'] !== undefined && !isPath(input['path']))) return false;
      } else if (kind === 'value') {
        if (!isJson(input['value'], 0) || (input['sensitive'] !== undefined && input['sensitive'] !== true)) return false;
      } else if (kind === 'env') {
        if (typeof input['name'] !== 'string' || !ENV_NAME.test(input['name'])) return false;
      } else if (kind === 'glob') {
        if (!isPath(input['pattern'])) return false;
      } else return false;
    }
  }
  for (const key of ['description', 'version', 'cwd', 'pool'] as const) {
    const v = spec[key];
    if (v !== undefined && typeof v !== 'string') return false;
  }
  if (spec['pool'] === '') return false;
  const after = spec['after'];
  if (after !== undefined && !(Array.isArray(after) && after.every(isRef))) return false;
  const check = spec['check'];
  if (check !== undefined && typeof check !== 'function' && !isCommand(check)) return false;
  for (const key of ['stop', 'destroy'] as const) {
    const v = spec[key];
    if (v !== undefined && !isCommand(v) && !(Array.isArray(v) && v.length > 0 && v.every(isCommand))) return false;
  }
  const env = spec['env'];
  if (env !== undefined && (!isStringRecord(env) || !Object.keys(env as object).every((name) => COMMAND_ENV_NAME.test(name)))) return false;
  const remove = spec['removeOutputs'];
  if (remove !== undefined && typeof remove !== 'boolean' && remove !== 'dropped') return false;
  const retire = spec['retire'];
  if (retire !== undefined && retire !== 'destroy' && retire !== 'stop') return false;
  // A health spec's durations are the schema's to check.
  if (spec['health'] !== undefined) return false;
  if (spec['timeout'] !== undefined && !isTimeout(spec['timeout'])) return false;
  const verbs = spec['verbs'];
  if (verbs !== undefined) {
    if (typeof verbs !== 'object' || verbs === null || Array.isArray(verbs)) return false;
    for (const key in verbs) {
      const v = (verbs as Record<string, unknown>)[key];
      if (key === 'upstream') {
        if (v !== undefined && (!isStringRecord(v) || !Object.values(v as object).every((word) => VERB.test(word as string)))) return false;
      } else if ((key !== 'create' && key !== 'update') || (v !== undefined && (typeof v !== 'string' || !VERB.test(v)))) return false;
    }
  }
  return true;
}

const isCommand = (v: unknown): boolean => isArgv(v) || isShell(v);

function isShell(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const key in v) if (key !== 'shell') return false;
  return isPath((v as Record<string, unknown>)['shell']);
}

function isRef(v: unknown): boolean {
  if (typeof v === 'string') return v.length > 0;
  return typeof v === 'object' && v !== null && (v as Record<string, unknown>)['kind'] === 'task' && typeof (v as Record<string, unknown>)['id'] === 'string';
}

function isStringRecord(v: unknown): boolean {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  for (const key in v) if (typeof (v as Record<string, unknown>)[key] !== 'string') return false;
  return true;
}
