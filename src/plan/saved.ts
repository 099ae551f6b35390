// A saved plan is bound to what it observed: every task's definition and
// observed hashes, and the state. Applying it after any of that changed is
// refused, with the list of what changed. Pure: operations.ts reads and
// writes the plan file.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from '../error.ts';
import type { ContentHash, TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { hashValue } from '../hash/value.ts';
import type { Records } from '../state/records.ts';
import { err, ok, type Result } from '../util/result.ts';
import { isStrings } from '../util/guards.ts';
import type { TaskObservation } from './decide.ts';
import { definitionOf } from './definition.ts';
import type { Plan, PlanDocument } from './plan.ts';

export const PLAN_FORMAT = 'nodegraph-plan';
/** How a saved plan's file begins (`format` is its first field). */
export const PLAN_HEAD = `{"format":${JSON.stringify(PLAN_FORMAT)}`;
export const PLAN_VERSION = 1;

export interface SavedPlan {
  readonly format: typeof PLAN_FORMAT;
  readonly version: typeof PLAN_VERSION;
  readonly nodefile: string;
  readonly targets: readonly string[];
  readonly replace: readonly string[];
  readonly createdAt: string;
  readonly state: ContentHash;
  readonly tasks: Readonly<Record<string, ContentHash>>;
  /** What each task's digest in `tasks` is of, so a refusal can name what changed; absent in plans saved before it was kept. */
  readonly observed?: Readonly<Record<string, ObservedParts>>;
  readonly plan: PlanDocument;
}

/** What a task's observed digest covers, part by part. */
export interface ObservedParts {
  readonly definition: ContentHash;
  readonly inputs: Readonly<Record<string, ContentHash>>;
  /** The path of each file, tree and glob input, as declared: what a refusal names. */
  readonly paths: Readonly<Record<string, string>>;
  readonly outputs: Readonly<Record<string, ContentHash | 'missing'>>;
  readonly check: boolean | null;
}

function observedParts(graph: TaskGraph, node: TaskNode, observation: TaskObservation): ObservedParts {
  const paths: Record<string, string> = {};
  for (const name in node.inputs) {
    const input = node.inputs[name]!;
    if (input.kind === 'file' || input.kind === 'tree') paths[name] = input.path;
    else if (input.kind === 'glob') paths[name] = input.pattern;
  }
  return {
    definition: definitionOf(node, graph.dir),
    inputs: Object.fromEntries(observation.inputs),
    paths,
    outputs: Object.fromEntries(observation.outputs),
    check: observation.check?.ok ?? null,
  };
}

export function observedDigest(graph: TaskGraph, node: TaskNode, observation: TaskObservation): ContentHash {
  return digestOf(observedParts(graph, node, observation));
}

const digestOf = (parts: ObservedParts): ContentHash =>
  hashValue({ definition: parts.definition, inputs: parts.inputs, outputs: parts.outputs, check: parts.check });

export function stateDigest(records: Records): ContentHash {
  const entries = [...records.values()]
    .map((r) => [r.id, r.status, r.fingerprint, r.outputHash])
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0));
  return hashValue(entries);
}

export function bindPlan(
  graph: TaskGraph,
  selected: readonly TaskNode[],
  observations: ReadonlyMap<TaskId, TaskObservation>,
  records: Records,
  plan: Plan,
  options: { targets: readonly string[]; replace: readonly string[]; createdAt: string },
): SavedPlan {
  const tasks: Record<string, ContentHash> = {};
  const observed: Record<string, ObservedParts> = {};
  for (const node of selected) {
    const parts = observedParts(graph, node, observations.get(node.id)!);
    tasks[node.id] = digestOf(parts);
    observed[node.id] = parts;
  }
  return {
    format: PLAN_FORMAT,
    version: PLAN_VERSION,
    nodefile: graph.file,
    targets: options.targets,
    replace: options.replace,
    createdAt: options.createdAt,
    state: stateDigest(records),
    tasks,
    observed,
    plan: plan.toJSON(),
  };
}

/** What differs between a saved plan and what is observed now; empty when it still holds. */
export function planChanges(saved: SavedPlan, current: SavedPlan): string[] {
  const changes: string[] = [];
  if (saved.state !== current.state) changes.push('the state changed (another apply or destroy ran)');
  for (const [id, digest] of Object.entries(current.tasks)) {
    const before = saved.tasks[id];
    if (before === undefined) changes.push(`task ${id} is new`);
    else if (before !== digest) {
      const named = partChanges(saved.observed?.[id], current.observed?.[id], path.dirname(current.nodefile));
      if (named.length === 0) changes.push(`task ${id}: its definition, inputs, outputs or check changed`);
      for (const change of named) changes.push(`task ${id}: ${change}`);
    }
  }
  for (const id of Object.keys(saved.tasks)) if (!(id in current.tasks)) changes.push(`task ${id} is gone`);
  return changes;
}

/** Which parts of a task's observation differ, in words; empty when that is not known (a plan saved without them). */
function partChanges(before: ObservedParts | undefined, now: ObservedParts | undefined, dir: string): string[] {
  if (typeof before !== 'object' || before === null || now === undefined) return [];
  const changes: string[] = [];
  if (before.definition !== now.definition) changes.push('its definition changed');
  const named = (name: string): string => {
    const p = Object.hasOwn(now.paths, name) ? now.paths[name] : Object.hasOwn(before.paths ?? {}, name) ? before.paths[name] : undefined;
    return p === undefined ? `input ${name}` : `input ${name} (${p})`;
  };
  for (const name of Object.keys(now.inputs)) {
    if (!Object.hasOwn(before.inputs ?? {}, name)) changes.push(`${named(name)} was added`);
    else if (before.inputs[name] !== now.inputs[name]) changes.push(`${named(name)} changed`);
  }
  for (const name of Object.keys(before.inputs ?? {})) if (!Object.hasOwn(now.inputs, name)) changes.push(`${named(name)} was removed`);
  for (const output of new Set([...Object.keys(before.outputs ?? {}), ...Object.keys(now.outputs)])) {
    const was = before.outputs?.[output];
    const is = now.outputs[output];
    if (was === is) continue;
    const shown = path.relative(dir, output) || output;
    changes.push(is === 'missing' ? `output ${shown} is gone` : `output ${shown} changed`);
  }
  if (before.check !== now.check) changes.push(now.check === false ? 'its check fails now' : now.check === true ? 'its check passes now' : 'its check is not run now');
  return changes;
}

/** The saved plan in `text`, the content of the plan file `file`. */
export function parseSavedPlan(file: string, text: string): Result<SavedPlan, Failure> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return err({ reason: 'plan-file-invalid', path: file, message: (error as Error).message });
  }
  const p = parsed as Partial<SavedPlan> | null;
  if (p === null || typeof p !== 'object' || p.format !== PLAN_FORMAT) {
    return err({ reason: 'plan-file-invalid', path: file, message: 'not a nodegraph plan file' });
  }
  if (p.version !== PLAN_VERSION) {
    return err({ reason: 'plan-file-invalid', path: file, message: `plan format version ${String(p.version)}, this nodegraph reads ${PLAN_VERSION}` });
  }
  const field = damagedField(p);
  if (field !== undefined) return err({ reason: 'plan-file-invalid', path: file, message: `its ${field} is not what plan --out writes` });
  return ok(p as SavedPlan);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The first field of a saved plan that is not of its type, or undefined. */
function damagedField(p: Partial<SavedPlan>): string | undefined {
  if (typeof p.nodefile !== 'string' || !path.isAbsolute(p.nodefile)) return 'nodefile';
  if (!isStrings(p.targets)) return 'targets';
  if (!isStrings(p.replace)) return 'replace';
  if (typeof p.createdAt !== 'string') return 'createdAt';
  if (typeof p.state !== 'string') return 'state';
  if (!isObject(p.tasks) || !Object.values(p.tasks).every((h) => typeof h === 'string')) return 'tasks';
  if (p.observed !== undefined && !isObject(p.observed)) return 'observed';
  if (!isObject(p.plan)) return 'plan';
  return undefined;
}

/** The plan that `plan --out` wrote to `file`. */
export function readSavedPlan(file: string): Result<SavedPlan, Failure> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message = code === 'ENOENT' ? 'there is no such file (plan --out FILE writes one)' : code === 'EISDIR' ? 'it is a folder' : (error as Error).message;
    return err({ reason: 'plan-file-invalid', path: file, message });
  }
  return parseSavedPlan(file, text);
}
