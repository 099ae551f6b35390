// zod schemas for a task declaration. Validation is a pure function; reading
// the Nodefile lives in load.ts. Loaded only when a declaration is not one of
// the plain shapes plain.ts recognises (zod is a tenth of a second to load).

import { z } from 'zod';
import type { TaskSpec } from './types.ts';
import { err, ok, type Result } from '../util/result.ts';
import { ID_MESSAGE, ID_PATTERN } from './plain.ts';
import { DURATION_MESSAGE, parseDuration } from '../util/duration.ts';

const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';

const argv = z.array(z.string()).min(1, 'a command needs at least the program name');
const command = z.union([argv, z.strictObject({ shell: z.string().min(1) })]);
const commands = z.union([command, z.array(command)]);
const fn = z.custom<(...args: never[]) => unknown>(isFunction, { message: 'expected a function' });
/** What a union of command and function says when a value is none of them (zod's own: "Invalid input"). */
const RUN_SHAPES = 'expected an argv of strings (["cp", "a", "b"]), { shell: "…" } or a function';

const json: z.ZodType = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);

const relPath = z.string().min(1, 'a path must not be empty');

export const inputSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('file'), path: relPath }),
  z.object({ kind: z.literal('tree'), path: relPath }),
  z.object({ kind: z.literal('glob'), pattern: relPath }),
  z.object({ kind: z.literal('value'), value: json, sensitive: z.literal(true).optional() }),
  z.object({ kind: z.literal('env'), name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'not an environment variable name') }),
  z.object({ kind: z.literal('task'), id: z.string().min(1), path: relPath.optional() }),
]);

export const taskIdSchema = z.string().regex(ID_PATTERN, ID_MESSAGE);

export const taskSpecSchema = z.strictObject({
  description: z.string().optional(),
  inputs: z.record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'an input name is [A-Za-z0-9_.-]+'), inputSchema).optional(),
  outputs: z.array(relPath).optional(),
  after: z.array(z.union([z.string().min(1), z.object({ kind: z.literal('task'), id: z.string() })])).optional(),
  run: z.union([command, fn], { error: RUN_SHAPES }),
  version: z.string().optional(),
  cwd: z.string().optional(),
  env: z.record(z.string(), z.string()).optional(),
  check: z.union([command, fn], { error: RUN_SHAPES }).optional(),
  stop: commands.optional(),
  destroy: commands.optional(),
  removeOutputs: z.boolean().optional(),
  retire: z.enum(['destroy', 'stop']).optional(),
  pool: z.string().min(1).optional(),
  verbs: z
    .strictObject({ create: z.string().optional(), update: z.string().optional(), upstream: z.record(z.string(), z.string()).optional() })
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
}

function toIssues(error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({
    field: issue.path.map(String).join('.'),
    message: issue.message,
  }));
}

/** Checks one task declaration. TaskRef handles in inputs must already be normalised to plain specs. */
export function validateTaskSpec(spec: unknown): Result<TaskSpec, FieldIssue[]> {
  const parsed = taskSpecSchema.safeParse(spec);
  if (!parsed.success) return err(toIssues(parsed.error));
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
