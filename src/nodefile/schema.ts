// zod schemas for a task declaration. Validation is a pure function; reading
// the Nodefile lives in load.ts.

import { z } from 'zod';
import type { TaskSpec } from './types.ts';
import { err, ok, type Result } from '../util/result.ts';

const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';

const argv = z.array(z.string()).min(1, 'a command needs at least the program name');
const command = z.union([argv, z.strictObject({ shell: z.string().min(1) })]);
const commands = z.union([command, z.array(command)]);
const fn = z.custom<(...args: never[]) => unknown>(isFunction, { message: 'expected a function' });

const json: z.ZodType = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);

const relPath = z.string().min(1, 'a path must not be empty');

export const inputSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('file'), path: relPath }),
  z.object({ kind: z.literal('tree'), path: relPath }),
  z.object({ kind: z.literal('glob'), pattern: relPath }),
  z.object({ kind: z.literal('value'), value: json }),
  z.object({ kind: z.literal('env'), name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name') }),
  z.object({ kind: z.literal('task'), id: z.string().min(1), path: relPath.optional() }),
]);

const idPattern = /^[A-Za-z0-9_.:@+-]+(\/[A-Za-z0-9_.:@+-]+)*$/;
export const taskIdSchema = z
  .string()
  .regex(idPattern, 'a task id is words of [A-Za-z0-9_.:@+-] joined by "/", e.g. kube1/containerd.config');

export const taskSpecSchema = z.strictObject({
  description: z.string().optional(),
  inputs: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'an input name is [A-Za-z0-9_.-]+'), inputSchema).optional(),
  outputs: z.array(relPath).optional(),
  after: z.array(z.union([z.string().min(1), z.object({ kind: z.literal('task'), id: z.string() })])).optional(),
  run: z.union([command, fn]),
  version: z.string().optional(),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  check: z.union([command, fn]).optional(),
  stop: commands.optional(),
  destroy: commands.optional(),
  removeOutputs: z.boolean().optional(),
  pool: z.string().min(1).optional(),
  verbs: z
    .strictObject({ create: z.string().optional(), update: z.string().optional(), upstream: z.record(z.string(), z.string()).optional() })
    .optional(),
});

export interface FieldIssue {
  /** Dotted path of the offending field (`inputs.archive.path`), or '' for the whole spec. */
  readonly field: string;
  readonly message: string;
}

function toIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({
    field: issue.path.map(String).join('.'),
    message: issue.message,
  }));
}

const SPEC_KEYS = new Set(Object.keys(taskSpecSchema.shape));
const isArgv = (v: unknown): boolean =>
  Array.isArray(v) && v.length > 0 && v.every((a) => typeof a === 'string');
const isPath = (v: unknown): boolean => typeof v === 'string' && v.length > 0;
const NAME = /^[A-Za-z0-9_.-]+$/;

/**
 * The common shapes, checked without zod: a graph of 50,000 tasks must load
 * in well under a second. It only ever says yes to a spec the schema accepts
 * (a property test holds it to that); anything else goes to zod, which has
 * the last word and the messages.
 */
export function plainlyValid(spec: Record<string, unknown>): boolean {
  for (const key in spec) if (!SPEC_KEYS.has(key)) return false;
  const run = spec['run'];
  if (typeof run !== 'function' && !isArgv(run)) return false;
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
      } else return false; // values, envs, globs: rarer, zod checks them
    }
  }
  for (const key of ['description', 'version', 'cwd', 'pool'] as const) {
    const v = spec[key];
    if (v !== undefined && typeof v !== 'string') return false;
  }
  if (spec['pool'] === '') return false;
  for (const key of ['after', 'env', 'check', 'stop', 'destroy', 'removeOutputs', 'verbs'] as const) {
    if (spec[key] !== undefined) return false;
  }
  return true;
}

/** Checks one task declaration. TaskRef handles in inputs must already be normalised to plain specs. */
export function validateTaskSpec(spec: unknown): Result<TaskSpec, FieldIssue[]> {
  if (typeof spec === 'object' && spec !== null && plainlyValid(spec as Record<string, unknown>)) return ok(spec as TaskSpec);
  const parsed = taskSpecSchema.safeParse(spec);
  if (!parsed.success) return err(toIssues(parsed.error));
  // zod copies what it parses; keep the user's object so functions keep their identity.
  return ok(spec as TaskSpec);
}

export function validateTaskId(id: unknown): Result<string, FieldIssue[]> {
  const parsed = taskIdSchema.safeParse(id);
  return parsed.success ? ok(parsed.data) : err(toIssues(parsed.error).map((i) => ({ ...i, field: 'id' })));
}
