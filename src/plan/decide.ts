// Whether one task must run, and why. Pure: the planner calls it with what
// it predicts of the upstream tasks, the executor with what actually happened,
// so plan and apply cannot disagree about a settled task.

import { shortHash, type ContentHash, type TaskId } from '../ids.ts';
import type { TaskNode } from '../graph/graph.ts';
import type { TaskObservation } from '../hash/observation.ts';
import { hashParts } from '../hash/value.ts';
import { outputsDigest } from '../hash/value.ts';
import type { TaskRecord } from '../state/record.ts';
import { STOPPED } from '../types.ts';
import type { Records } from '../state/records.ts';
import { reasonText, type ReasonDetail } from './reasons.ts';
import { valueChanges } from './value-diff.ts';

export type { TaskObservation };

export type Action = 'create' | 'update' | 'replace' | 'drift' | 'maybe' | 'unchanged';

/** What is known of an upstream task at the moment of deciding. */
export type UpstreamState =
  | { readonly settled: true; readonly outputHash: ContentHash; readonly ran: boolean }
  | { readonly settled: false };

export interface Decision {
  readonly action: Action;
  /** Why, in words; `details` says the same as data, one for one. */
  readonly reasons: readonly string[];
  readonly details: readonly ReasonDetail[];
  readonly upstream: Readonly<Record<string, ContentHash>>;
  /** Undefined for a first or forced run, where every input counts as changed: the observation's input names. */
  readonly changedInputs: readonly string[] | undefined;
  readonly changedUpstream: readonly TaskId[];
  /** When the task acts only because of upstream tasks (changed or still to run): which. */
  readonly onlyBecauseOf: readonly TaskId[] | undefined;
  /** Every upstream was settled when this was decided, so `upstream` is complete. */
  readonly complete: boolean;
  /** The task was stopped by `nodegraph stop`: it runs to start what it manages, not to change it. */
  readonly stopped?: true;
  /**
   * For an unchanged task whose record holds a sensitive input as its plain SHA-256
   * (written before keyed digests): the same record with those inputs' keyed digests
   * and the fingerprint they give, for an apply to write in its place.
   */
  readonly rekeyed?: TaskRecord;
}

export function fingerprintOf(
  definition: ContentHash,
  inputs: ReadonlyMap<string, ContentHash>,
  upstream: Readonly<Record<string, ContentHash>>,
): ContentHash {
  const parts: string[] = [definition];
  for (const name of [...inputs.keys()].sort()) parts.push(`i:${name}`, inputs.get(name)!);
  for (const id of Object.keys(upstream).sort()) parts.push(`u:${id}`, upstream[id]!);
  return hashParts(parts);
}

/** A record's entry for a key, never one inherited from Object.prototype (an input named `constructor`). */
const own = (map: Readonly<Record<string, ContentHash>>, key: string): ContentHash | undefined =>
  Object.hasOwn(map, key) ? map[key] : undefined;

/** Why `name` changed: key by key for a value recorded with its JSON, `(sensitive)` for an env input or a sensitive value, else its hashes. */
function inputChanged(node: TaskNode, record: TaskRecord, name: string, before: ContentHash, after: ContentHash): ReasonDetail {
  const input = Object.hasOwn(node.inputs, name) ? node.inputs[name] : undefined;
  if (input?.kind === 'env' || (input?.kind === 'value' && input.sensitive === true)) return { kind: 'input-changed', input: name, sensitive: true };
  const recorded = record.values !== undefined && Object.hasOwn(record.values, name) ? record.values[name] : undefined;
  const hashes = { from: shortHash(before), to: shortHash(after) };
  if (input?.kind !== 'value' || recorded === undefined) return { kind: 'input-changed', input: name, ...hashes };
  return { kind: 'input-changed', input: name, ...hashes, changes: valueChanges(recorded, input.value) };
}

/** Reasons in words and as data, kept one for one. */
const both = (details: readonly ReasonDetail[]): { reasons: readonly string[]; details: readonly ReasonDetail[] } => ({ reasons: details.map((d) => reasonText(d)), details });

export function decide(
  node: TaskNode,
  /**
   * The task's definition hash (plan/definition.ts), asked for only when a
   * successful record is there to compare it with: a first run's plan makes
   * none, so a build of 50,000 new tasks does not hold 50,000 of them at once.
   */
  definitionOf: () => ContentHash,
  observation: TaskObservation,
  records: Records,
  upstreamOf: (id: TaskId) => UpstreamState,
  forced: boolean,
): Decision {
  // A task may be called __proto__. One that consumes none shares one empty object: a null-prototype
  // object is a dictionary of its own, about 160 bytes even empty, and a plan keeps one a task.
  const upstream: Record<string, ContentHash> = node.needs.length === 0 ? NO_UPSTREAM : Object.create(null);
  const pending: TaskId[] = [];
  for (const id of node.needs) {
    const state = upstreamOf(id);
    if (state.settled) upstream[id] = state.outputHash;
    else pending.push(id);
  }
  const result = (
    action: Action,
    why: { readonly reasons: readonly string[]; readonly details: readonly ReasonDetail[] },
    // By default every input and upstream counts as changed (a first or forced run): undefined
    // says "every input" without a list a task.
    changedInputs: readonly string[] | undefined = undefined,
    changedUpstream: readonly TaskId[] = node.needs.length === 0 ? NONE : [...node.needs],
    onlyBecauseOf?: TaskId[],
  ): Decision => ({
    action,
    reasons: why.reasons,
    details: why.details,
    upstream,
    changedInputs,
    changedUpstream,
    onlyBecauseOf,
    complete: pending.length === 0,
  });

  // A first run of a task that consumes no other's output decides the same for all: one
  // object, not one a task (a build of 50,000 new tasks plans 50,000 of them at once).
  if (forced) return node.needs.length === 0 ? REPLACE_ALONE : result('replace', FORCED);
  const status = records.status(node.id);
  if (status === undefined) {
    if (records.destroyed(node.id)) return node.needs.length === 0 ? DESTROYED_ALONE : result('create', DESTROYED);
    return node.needs.length === 0 ? CREATE_ALONE : result('create', NEVER_RAN);
  }
  if (status === 'failed') {
    const error = records.get(node.id)?.error;
    const decision = result('update', both([lastRunFailed(error)]));
    return error === STOPPED ? { ...decision, stopped: true } : decision;
  }

  // The common case, from the record's fixed fields alone: the fingerprint covers the
  // definition, the inputs and the upstream outputs; the outputs digest covers the outputs.
  if (pending.length === 0 && records.holds(node.id, 'fingerprint', fingerprintOf(definitionOf(), observation.inputs, upstream))) {
    if (!hasMissing(observation.outputs) && records.holds(node.id, 'outputs', outputsDigest(observation.outputs))) {
      if (observation.check === undefined || observation.check.ok) return node.needs.length === 0 ? UNCHANGED_ALONE : result('unchanged', NO_WHY, NONE, NONE);
    }
  }
  const record = records.get(node.id);
  if (record === undefined) return node.needs.length === 0 ? CREATE_ALONE : result('create', NEVER_RAN);

  const legacy = observation.unkeyed === undefined ? undefined : unkeyedInView(observation, record);
  if (legacy !== undefined) {
    // The record predates keyed digests: a sensitive input whose recorded hash is the plain
    // SHA-256 of its value now is unchanged. Decided as if observed that way; a task that
    // need not run gets its record re-keyed (an apply writes it), one that runs records anew.
    const decision = decide(node, definitionOf, { inputs: legacy.view, outputs: observation.outputs, ...(observation.check === undefined ? {} : { check: observation.check }) }, records, upstreamOf, false);
    if (decision.action !== 'unchanged') return decision;
    const inputs = Object.fromEntries(Object.entries(record.inputs).map(([name, hash]) => [name, legacy.names.has(name) ? observation.inputs.get(name)! : hash]));
    return { ...decision, rekeyed: { ...record, inputs, fingerprint: fingerprintOf(definitionOf(), observation.inputs, upstream) } };
  }

  const found = changesSince(node, record, definitionOf(), observation, upstream, pending);
  if (found.reasons.length > 0) {
    const { reasons, changedInputs, changedUpstream } = found;
    return result('update', both(reasons), changedInputs, changedUpstream, found.ownReasons === 0 ? [...changedUpstream, ...pending] : undefined);
  }
  // Definition, inputs and upstream outputs all match: the fingerprint is only
  // derived from them, so a change in how it is derived re-runs nothing.
  const drift = driftOf(observation, record, node.cwd);
  if (pending.length > 0) {
    // Drifted or failing its check, it runs whatever its upstream does: certain, not "may".
    if (drift !== undefined) return result('drift', both(drift), NONE, NONE);
    return result('maybe', both(pending.map((id) => ({ kind: 'known-after', task: id }))), found.changedInputs, found.changedUpstream, pending);
  }
  // Most tasks of most runs end here: nothing to allocate for them but the decision.
  return drift === undefined ? result('unchanged', NO_WHY, NONE, NONE) : result('drift', both(drift), NONE, NONE);
}

interface Changes {
  readonly reasons: readonly ReasonDetail[];
  readonly changedInputs: string[];
  readonly changedUpstream: TaskId[];
  /** How many reasons are the task's own (definition, inputs, an upstream no longer consumed). */
  readonly ownReasons: number;
}

/** What changed since the record among the task's definition, inputs and settled upstream outputs. */
function changesSince(
  node: TaskNode,
  record: TaskRecord,
  definition: ContentHash,
  observation: TaskObservation,
  upstream: Readonly<Record<string, ContentHash>>,
  pending: readonly TaskId[],
): Changes {
  const reasons: ReasonDetail[] = [];
  const changedInputs: string[] = [];
  if (record.definition !== definition) reasons.push({ kind: 'definition-changed', from: shortHash(record.definition), to: shortHash(definition) });
  for (const [name, hash] of observation.inputs) {
    const before = own(record.inputs, name);
    if (before === hash) continue;
    changedInputs.push(name);
    reasons.push(before === undefined ? { kind: 'input-added', input: name } : inputChanged(node, record, name, before, hash));
  }
  for (const name of Object.keys(record.inputs)) {
    if (observation.inputs.has(name)) continue;
    changedInputs.push(name);
    reasons.push({ kind: 'input-removed', input: name });
  }
  const changedUpstream: TaskId[] = [];
  for (const id of node.needs) {
    const hash = upstream[id];
    if (hash === undefined) continue; // pending
    const before = own(record.upstream, id);
    if (before === hash) continue;
    changedUpstream.push(id);
    reasons.push(before === undefined ? { kind: 'upstream-added', task: id } : { kind: 'upstream-changed', task: id, from: shortHash(before), to: shortHash(hash) });
  }
  let ownReasons = reasons.length - changedUpstream.length;
  for (const id in record.upstream) {
    // Each need is either settled (in `upstream`) or pending: a hash lookup, not a scan of the needs.
    if (!Object.hasOwn(upstream, id) && !pending.includes(id as TaskId)) {
      reasons.push({ kind: 'upstream-removed', task: id });
      ownReasons++;
    }
  }
  return { reasons, changedInputs, changedUpstream, ownReasons };
}

/** How the outputs and the check disagree with the record, or undefined when they agree. */
function driftOf(observation: TaskObservation, record: TaskRecord, cwd: string): ReasonDetail[] | undefined {
  let drift: ReasonDetail[] | undefined;
  const ranIn = record.recipe.cwd === cwd ? {} : { ranIn: record.recipe.cwd };
  for (const [output, hash] of observation.outputs) {
    const recorded = own(record.outputs, output);
    if (hash === 'missing') (drift ??= []).push({ kind: 'output-missing', path: output });
    else if (recorded === undefined) (drift ??= []).push({ kind: 'output-unrecorded', path: output, ...ranIn });
    else if (recorded !== hash) (drift ??= []).push({ kind: 'output-modified', path: output });
  }
  if (observation.check !== undefined && !observation.check.ok) {
    (drift ??= []).push({ kind: 'check-failed', detail: observation.check.detail });
  }
  return drift;
}

/**
 * The observation's inputs with each sensitive one whose record holds its plain SHA-256
 * put back to that hash, and their names; undefined when the record holds none so.
 */
function unkeyedInView(observation: TaskObservation, record: TaskRecord): { view: Map<string, ContentHash>; names: Set<string> } | undefined {
  let names: Set<string> | undefined;
  for (const [name, plain] of observation.unkeyed!) if (own(record.inputs, name) === plain) (names ??= new Set()).add(name);
  if (names === undefined) return undefined;
  const view = new Map(observation.inputs);
  for (const name of names) view.set(name, record.inputs[name]!);
  return { view, names };
}

/**
 * Why a task whose last run did not succeed runs again, with what went wrong
 * then: `last run failed: exited with code 3`, `last run was canceled`,
 * `stopped by nodegraph stop` (a task stopped is started again). The
 * error's first line only, and at most 80 characters of it: the record keeps
 * it whole.
 */
export function lastRunFailed(error: string | undefined): ReasonDetail {
  if (error === 'canceled') return { kind: 'last-run-canceled' };
  if (error === STOPPED) return { kind: 'stopped' };
  const line = error?.split('\n', 1)[0]!.trim() ?? '';
  if (line === '') return { kind: 'last-run-failed' };
  return { kind: 'last-run-failed', error: line.length > 80 ? `${line.slice(0, 79)}…` : line };
}

function hasMissing(outputs: ReadonlyMap<string, ContentHash | 'missing'>): boolean {
  for (const hash of outputs.values()) if (hash === 'missing') return true;
  return false;
}

const NONE: readonly never[] = Object.freeze([]);
const NO_WHY = Object.freeze({ reasons: NONE, details: NONE });
const NEVER_RAN = Object.freeze(both([{ kind: 'never-ran' }]));
const NO_UPSTREAM: Readonly<Record<string, ContentHash>> = Object.freeze(Object.create(null));
const FORCED = Object.freeze(both([{ kind: 'forced' }]));
const firstAlone = (action: 'create' | 'replace', why: typeof NEVER_RAN): Decision =>
  Object.freeze({ action, ...why, upstream: NO_UPSTREAM, changedInputs: undefined, changedUpstream: NONE, onlyBecauseOf: undefined, complete: true });
const CREATE_ALONE = firstAlone('create', NEVER_RAN);
const DESTROYED = Object.freeze(both([{ kind: 'destroyed' }]));
const DESTROYED_ALONE = firstAlone('create', DESTROYED);
/** The decision for an unchanged task that consumes no other's output: one for all. */
const UNCHANGED_ALONE: Decision = Object.freeze({ action: 'unchanged', ...NO_WHY, upstream: NO_UPSTREAM, changedInputs: NONE, changedUpstream: NONE, onlyBecauseOf: undefined, complete: true });
const REPLACE_ALONE = firstAlone('replace', FORCED);
