// zod schemas for a task declaration. Validation is a pure function; reading
// the Nodefile lives in load.ts. Loaded only when a declaration is not one of
// the plain shapes plain.ts recognises (zod is a tenth of a second to load).

import { z } from 'zod';
import type { TaskSpec } from './types.ts';
import { err, ok, type Result } from '../util/result.ts';
import { COMMAND_ENV_NAME, ID_MESSAGE, ID_PATTERN, VERB } from './plain.ts';
import { DURATION_MESSAGE, isTimeout, parseDuration } from '../util/duration.ts';
import { nearest } from '../util/nearest.ts';

const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';

const argv = z
  .array(z.string())
  .min(1, 'a command needs at least the program name')
  .refine((a) => a.length === 0 || a[0]!.trim() !== '', 'the program name is empty'); // zod runs it after min() failed too
const command = z.union([argv, z.strictObject({ shell: z.string().min(1) })]);
/** A command or a list of them; an empty list is refused, as an empty argv is: `[]` reads as either. */
const commands = (field: string) =>
  z.union([command, z.array(command)]).refine((c) => !Array.isArray(c) || c.length > 0, `an empty list runs nothing: give at least one command, or leave ${field} out`);
const fn = z.custom<(...args: never[]) => unknown>(isFunction, { message: 'expected a function' });
/** What a union of command and function says when a value is none of them (zod's own: "Invalid input"). */
const RUN_SHAPES = 'expected an argv of strings (["cp", "a", "b"]), { shell: "…" } or a function';

const json: z.ZodType = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);

const relPath = z.string().min(1, 'a path must not be empty');
/** A word the plan shows in its verb column: `start`, `restart`. */
const verb = z.string().regex(VERB, 'a verb is what the plan shows (start, leave in containerd): words on one line');

export const inputSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('file'), path: relPath }),
  z.object({ kind: z.literal('tree'), path: relPath }),
  z.object({ kind: z.literal('glob'), pattern: relPath }),
  z.object({ kind: z.literal('value'), value: json, sensitive: z.literal(true).optional() }),
  z.object({ kind: z.literal('env'), name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name') }),
  z.object({ kind: z.literal('task'), id: z.string().min(1), path: relPath.optional() }),
]);

export const taskIdSchema = z.string().regex(ID_PATTERN, ID_MESSAGE);

const TIMEOUT_MESSAGE = "a timeout is a duration longer than none: '500ms', '30s', '5m' or '1h'";

export const taskSpecSchema = z.strictObject({
  description: z.string().optional(),
  inputs: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'an input name is [A-Za-z0-9_.-]+'), inputSchema).optional(),
  outputs: z.array(relPath).optional(),
  after: z.array(z.union([z.string().min(1, 'an empty string names no task: give a task id, or the task ng.task returned'), z.object({ kind: z.literal('task'), id: z.string() })])).optional(),
  run: z.union([command, fn], { error: RUN_SHAPES }),
  version: z.string().optional(),
  cwd: z.string().optional(),
  env: z.record(z.string().regex(COMMAND_ENV_NAME, 'an environment name is not empty and holds no ='), z.string()).optional(),
  check: z.union([command, fn], { error: RUN_SHAPES }).optional(),
  timeout: z.string({ error: TIMEOUT_MESSAGE }).refine(isTimeout, TIMEOUT_MESSAGE).optional(),
  stop: commands('stop').optional(),
  destroy: commands('destroy').optional(),
  removeOutputs: z.union([z.boolean(), z.literal('dropped')], { error: (issue) => `true, false or 'dropped', not ${JSON.stringify(issue.input) ?? `a ${typeof issue.input}`}` }).optional(),
  retire: z.enum(['destroy', 'stop']).optional(),
  pool: z.string().min(1).optional(),
  verbs: z
    .strictObject({ create: verb.optional(), update: verb.optional(), upstream: z.record(z.string(), verb).optional() })
    .optional(),
  health: z
    .strictObject({
      within: z.string().refine((d) => parseDuration(d) !== undefined, DURATION_MESSAGE),
      stable: z.string().refine((d) => parseDuration(d) !== undefined, DURATION_MESSAGE).optional(),
      onFailure: fn.optional(),
    })
    .optional(),
});

export interface FieldIssue {
  /** Dotted path of the offending field (`inputs.archive.path`), or '' for the whole spec. */
  readonly field: string;
  readonly message: string;
  /** For a key the spec does not know: the key as written, for a diagnostic to point at. */
  readonly key?: string;
}

const TASK_FIELDS = Object.keys(taskSpecSchema.shape);

function toIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.flatMap((issue): FieldIssue[] => {
    const at = issue.path.map(String);
    // A record's key that its pattern refuses: named quoted (it may be empty, or hold a `.`), with the pattern's message.
    if (issue.code === 'invalid_key') {
      return [{ field: `${at.slice(0, -1).join('.')}[${JSON.stringify(at.at(-1) ?? '')}]`, message: issue.issues[0]?.message ?? issue.message }];
    }
    if (issue.code !== 'unrecognized_keys') return [{ field: at.join('.'), message: issue.message }];
    // One issue a key, named, with the field it may have meant.
    return issue.keys.map((key) => {
      const meant = at.length === 0 ? nearest(key, TASK_FIELDS) : undefined;
      const of = at.length === 0 ? 'a task' : at.join('.');
      return { field: [...at, key].join('.'), message: `not a field of ${of}${meant === undefined ? '' : `; did you mean ${meant}?`}`, key };
    });
  });
}

/**
 * Where `value` is not JSON and why, in the words of the one who wrote it: the path
 * below the value (`.when`, `[2]`, `["a b"]`, '' for the value itself) and what to
 * write instead. Undefined when it is JSON.
 */
/** Deeper values are refused: checking and hashing them recurse, and zod's check would overflow the stack. */
const MAX_VALUE_DEPTH = 1000;

export function notJson(value: unknown): { readonly path: string; readonly message: string } | undefined {
  const ancestors = new Set<object>();
  const visit = (v: unknown, at: string): { path: string; message: string } | undefined => {
    const problem = (message: string): { path: string; message: string } => ({ path: at, message });
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return undefined;
      case 'number':
        return Number.isFinite(v) ? undefined : problem(`${String(v)} is not JSON; use null or a finite number`);
      case 'bigint':
        return problem('a BigInt is not JSON; use a number, or a string (its toString())');
      case 'undefined':
        return problem('undefined is not JSON; use null, or leave the key out');
      case 'function':
        return problem('a function is not JSON; use the value it returns');
      case 'symbol':
        return problem('a symbol is not JSON; use a string');
    }
    if (v === null) return undefined;
    const object = v as object;
    if (ancestors.has(object)) return problem('the value contains itself, which JSON cannot');
    // Said of the whole value: the path itself would be a thousand steps long.
    if (ancestors.size >= MAX_VALUE_DEPTH) return { path: '', message: `it is nested deeper than ${MAX_VALUE_DEPTH} levels` };
    if (object instanceof Date) return problem('a Date is not JSON; use its toISOString()');
    if (object instanceof Map) return problem('a Map is not JSON; use Object.fromEntries(map)');
    if (object instanceof Set) return problem('a Set is not JSON; use an array ([...set])');
    if (!Array.isArray(object)) {
      const proto: unknown = Object.getPrototypeOf(object);
      if (proto !== Object.prototype && proto !== null) {
        const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
        return problem(`${typeof name === 'string' && name !== '' ? `a ${name}` : 'an object that is not a plain object'} is not JSON; use a plain object of its fields`);
      }
    }
    ancestors.add(object);
    try {
      if (Array.isArray(object)) {
        for (let i = 0; i < object.length; i++) {
          const found = visit(object[i], `${at}[${i}]`);
          if (found !== undefined) return found;
        }
        return undefined;
      }
      for (const [key, item] of Object.entries(object)) {
        const found = visit(item, /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${at}.${key}` : `${at}[${JSON.stringify(key)}]`);
        if (found !== undefined) return found;
      }
      return undefined;
    } finally {
      ancestors.delete(object);
    }
  };
  return visit(value, '');
}

/** The value inputs of a spec that are not JSON, each with its path and reason, and the field of the value. */
function valueIssues(spec: unknown): (FieldIssue & { readonly value: string; readonly input: string })[] {
  const inputs = typeof spec === 'object' && spec !== null ? (spec as { inputs?: unknown }).inputs : undefined;
  if (typeof inputs !== 'object' || inputs === null) return [];
  const issues: (FieldIssue & { readonly value: string; readonly input: string })[] = [];
  for (const [name, input] of Object.entries(inputs)) {
    if (typeof input !== 'object' || input === null || (input as { kind?: unknown }).kind !== 'value') continue;
    const found = notJson((input as { value?: unknown }).value);
    if (found !== undefined) issues.push({ field: `inputs.${name}.value${found.path}`, message: found.message, value: `inputs.${name}.value`, input: name });
  }
  return issues;
}

/** `spec` with the value of each input named in `values` replaced by null. */
function withValuesSetAside(spec: { inputs: Record<string, object> }, values: readonly { readonly input: string }[]): unknown {
  const inputs = { ...spec.inputs };
  for (const { input } of values) inputs[input] = { ...inputs[input], value: null };
  return { ...spec, inputs };
}

/** Checks one task declaration. TaskRef handles in inputs must already be normalised to plain specs. */
export function validateTaskSpec(spec: unknown): Result<TaskSpec, FieldIssue[]> {
  // A value that is not JSON is said with its path and reason, in place of zod's "Invalid input" for it; zod checks
  // the rest with it set aside (it would accept a value that contains itself, and overflow on a very deep one).
  const values = valueIssues(spec);
  const parsed = taskSpecSchema.safeParse(values.length === 0 ? spec : withValuesSetAside(spec as { inputs: Record<string, object> }, values));
  if (!parsed.success || values.length > 0) {
    const covered = (field: string): boolean => values.some((v) => field === v.value || field.startsWith(`${v.value}.`));
    const issues = parsed.success ? [] : toIssues(parsed.error).filter((issue) => !covered(issue.field));
    return err([...issues, ...values.map(({ field, message }) => ({ field, message }))]);
  }
  if (parsed.data.health !== undefined && parsed.data.check === undefined) {
    return err([{ field: 'health', message: 'a health task needs a check: health is that check passing' }]);
  }
  // zod copies what it parses; keep the user's object so functions keep their identity.
  return ok(spec as TaskSpec);
}

export function validateTaskId(id: unknown): Result<string, FieldIssue[]> {
  const parsed = taskIdSchema.safeParse(id);
  return parsed.success ? ok(parsed.data) : err(toIssues(parsed.error).map((i) => ({ ...i, field: 'id' })));
}
