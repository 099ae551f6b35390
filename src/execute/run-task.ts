// Decides and runs one task once its upstream tasks have settled (ninja's
// Builder; scheduler.ts says when): the decision, with early cutoff, its
// action and then its check, its outputs observed, and its record appended
// the moment it finishes.
//
//   decide ──unchanged──▶ (the scheduler settles it up to date)
//     │
//     ▼
//   output folders ──▶ action ──▶ outputs there ──▶ check holds ──▶ record ok, stale outputs removed ──▶ ran
//     │                  │          │                 │
//     └──────────────────┴──────────┴─────────────────┴──▶ record failed ──▶ failed | canceled

import { lstatSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { EventSink, TaskOutcome } from '../events.ts';
import type { ContentHash, TaskId } from '../ids.ts';
import type { OutputGuard } from '../graph/analyze.ts';
import { holds } from '../util/paths.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { HashCache } from '../hash/cache.ts';
import { NameNotUtf8, notUtf8 } from '../hash/names.ts';
import { canonicalJson, hashParts, hashValue } from '../hash/value.ts';
import type { Json } from '../types.ts';
import { decide, fingerprintOf, type Decision, type TaskObservation, type UpstreamState } from '../plan/decide.ts';
import { definitionOf } from '../plan/definition.ts';
import { verbFor } from '../plan/plan.ts';
import { reasonsLine } from '../plan/reasons.ts';
import { VALUE_RECORDED_MAX, type TaskRecord } from '../state/record.ts';
import type { RecordTable } from '../state/records.ts';
import type { Appended } from '../state/store.ts';
import { removePath } from '../util/mounts.ts';
import { realPath } from '../util/realpath.ts';
import { runCheck } from '../observe/check.ts';
import { observeOutputs } from '../observe/outputs.ts';
import { runAction, type ActionResult } from './action.ts';
import type { Appender } from './appender.ts';
import { Claimed, keptBecause } from './kept.ts';
import type { ProcessRunner } from '../process-runner.ts';
import { failpoint } from '../util/failpoint.ts';

export interface BuilderOptions {
  readonly graph: TaskGraph;
  /**
   * What was observed of each task. This and `planned` are consumed: a task's
   * entry is dropped once it is settled (Builder.forget), so a build does not
   * hold to its end what it observed and decided of every task done before.
   */
  readonly observations: Map<TaskId, TaskObservation>;
  /** The live records; updated as tasks finish. */
  readonly records: RecordTable;
  readonly store: Appender;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly replace: ReadonlySet<TaskId>;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  /**
   * The plan's decisions: reused for a task decided with every upstream settled
   * and none of whose upstream tasks ran since (so nothing it saw has moved).
   */
  readonly planned?: Map<TaskId, Decision>;
  /** Paths never removed (the project, the state): see OutputGuard and removeStale below. */
  readonly guard?: OutputGuard;
  /**
   * Called before a task's action starts (an atomic apply's write-ahead intent,
   * transaction/intents.ts); when it throws, the action does not start.
   */
  readonly intend?: (node: TaskNode) => void;
  /** The state folder, as a function action's ctx.stateDir. */
  readonly stateDir?: string;
}

/** What the builder asks of the scheduler. */
export interface BuilderHooks {
  /** Whether a task ran in this run. */
  ran(id: TaskId): boolean;
  /** Starts nothing more: the state can no longer be written. */
  stop(): void;
}

export class Builder {
  readonly #options: BuilderOptions;
  readonly #hooks: BuilderHooks;
  /** Output folders already made in this run: ninja-style, but once per folder. */
  readonly #made = new Set<string>();
  /** Every declared output, with its task: made once, and only if a task left an output behind. */
  #declared: Claimed | undefined;

  constructor(options: BuilderOptions, hooks: BuilderHooks) {
    this.#options = options;
    this.#hooks = hooks;
  }

  /** Decides a task whose upstream tasks have all settled: the plan's decision while nothing it needs ran since, else anew. */
  decide(node: TaskNode): Decision {
    const { graph, records, observations, replace, planned } = this.#options;
    const plannedNow = planned?.get(node.id);
    const decision =
      plannedNow !== undefined && plannedNow.complete && !node.needs.some(this.#hooks.ran)
        ? plannedNow
        : decide(node, () => definitionOf(node, graph.dir), observations.get(node.id)!, records, this.#upstreamOf, replace.has(node.id));
    // A record holding a secret's plain hash is replaced by its re-keyed copy, and the old line compacted away.
    if (decision.action === 'unchanged' && decision.rekeyed !== undefined) this.#record(decision.rekeyed, true);
    return decision;
  }

  /**
   * Runs a task decided to run, and calls `done` with how it ended, never with a
   * throw: one from recording the result makes the task count as failed rather
   * than the engine exit with children still running and the lock left behind.
   */
  run(node: TaskNode, decision: Decision, done: (outcome: TaskOutcome) => void): void {
    const verb = verbFor(node, decision.action, decision.onlyBecauseOf, decision.stopped);
    const firstRun = this.#options.records.get(node.id) === undefined;
    void this.#runOne(node, reasonsLine(decision.reasons), verb, firstRun, decision).then(done, (error: unknown) => done(this.#unexpected(node, error)));
  }

  /** Drops what this run held of a settled task: nothing asks for it again. */
  forget(node: TaskNode): void {
    this.#options.observations.delete(node.id);
    this.#options.planned?.delete(node.id);
  }

  readonly #upstreamOf = (id: TaskId): UpstreamState => {
    // Asked once the task has settled in this run: its record is what it left, or what the plan found unchanged.
    const records = this.#options.records;
    const outputHash = records.status(id) === 'ok' ? records.outputHash(id) : undefined;
    if (outputHash === undefined) return { settled: false };
    return { settled: true, outputHash, ran: this.#hooks.ran(id) };
  };

  #unexpected(node: TaskNode, error: unknown): TaskOutcome {
    const message = `nodegraph could not record the result: ${error instanceof Error ? error.message : String(error)}`;
    try {
      return this.#unsuccessful(node, 'failed', message, new Date(), 0);
    } catch {
      // the record's absence or an older one: the task runs again either way
      this.#options.emit({ type: 'task-done', id: node.id, outcome: 'failed', durationMs: 0, error: message });
      return 'failed';
    }
  }

  /** A task that did not succeed: nothing it did is trusted, so it is recorded as failed (the next run starts it again), and said. */
  #unsuccessful(
    node: TaskNode,
    outcome: 'failed' | 'canceled',
    error: string,
    startedAt: Date,
    durationMs: number,
    shown: { readonly command?: string | undefined; readonly output?: string | undefined; readonly exitCode?: number | undefined } = {},
  ): TaskOutcome {
    const { graph, records, emit } = this.#options;
    this.#record(failedRecord(node, graph, records.get(node.id), startedAt, durationMs, error));
    const { exitCode, ...rest } = shown;
    emit({ type: 'task-done', id: node.id, outcome, durationMs, error, ...rest, ...(exitCode === undefined ? {} : { exitCode }) });
    return outcome;
  }

  async #runOne(node: TaskNode, reason: string, verb: string, firstRun: boolean, decision: Decision): Promise<TaskOutcome> {
    const { graph, records, emit, signal, runner } = this.#options;
    const startedAt = new Date();
    const observation = this.#options.observations.get(node.id)!;
    try {
      this.#options.intend?.(node);
    } catch (error) {
      emit({ type: 'task-start', id: node.id, verb, reason, command: undefined });
      return this.#unsuccessful(node, 'failed', `could not record its intent before it ran: ${(error as Error).message}`, startedAt, 0);
    }
    for (const output of node.outputs) {
      const parent = path.dirname(output);
      if (this.#made.has(parent)) continue;
      try {
        mkdirSync(parent, { recursive: true });
      } catch (error) {
        // A read-only or full file system: the task cannot run, and did not.
        const message = `could not make the folder for its output ${path.relative(graph.dir, output) || output}: ${(error as Error).message}`;
        emit({ type: 'task-start', id: node.id, verb, reason, command: undefined });
        return this.#unsuccessful(node, 'failed', message, startedAt, 0);
      }
      this.#made.add(parent);
    }
    const result: ActionResult = await runAction(node, {
      runner,
      signal,
      reason,
      verb,
      firstRun,
      forced: decision.action === 'replace',
      stateDir: this.#options.stateDir,
      changedInputs: decision.changedInputs ?? [...observation.inputs.keys()],
      changedUpstream: decision.changedUpstream,
      ran: (id) => this.#hooks.ran(id as TaskId),
      emit,
    });
    failpoint(`ran:${node.id}`);
    const durationMs = Date.now() - startedAt.getTime();
    const previous = records.get(node.id);
    const failed = (outcome: 'failed' | 'canceled', error: string): TaskOutcome =>
      this.#unsuccessful(node, outcome, error, startedAt, durationMs, { command: result.command, output: result.output, exitCode: result.ok ? undefined : result.exitCode });
    if (!result.ok) return failed(result.canceled ? 'canceled' : 'failed', result.error);
    let outputs: Map<string, ContentHash | 'missing'>;
    try {
      outputs = await observeOutputs(node.outputs, this.#options.cache, signal);
    } catch (error) {
      // Ctrl-C while a large output was read: what the task made is not known, so not recorded as made.
      if (signal.aborted) return failed('canceled', 'canceled');
      // Nor when it made a name nodegraph cannot read: the task fails, and runs again next time.
      if (error instanceof NameNotUtf8) return failed('failed', `its output ${notUtf8(path.relative(graph.dir, error.path), 'make it under a UTF-8 name')}`);
      throw error;
    }
    const missing = [...outputs].filter(([, hash]) => hash === 'missing').map(([p]) => p);
    if (missing.length > 0) {
      return failed('failed', `declared output ${missing.map((p) => path.relative(graph.dir, p) || p).join(', ')} was not produced`);
    }
    if (node.decl.spec.check !== undefined) {
      // What the task manages must be in place now: a run that leaves its check failing
      // has not converged (Terraform's "inconsistent result after apply"), and saying ✔
      // on every apply while status says drifted would hide it.
      const verified = await runCheck(node, runner, signal);
      if (signal.aborted) return failed('canceled', 'canceled');
      if (verified !== undefined && !verified.ok) {
        return failed('failed', `ran, but its check still fails${verified.detail === '' ? '' : `: ${verified.detail}`}`);
      }
    }
    const outputHashes: Record<string, ContentHash> = {};
    for (const [p, hash] of outputs) outputHashes[p] = hash as ContentHash;
    const outputHash = combineOutputs(node, graph.dir, outputHashes, result.value, startedAt);
    const definition = definitionOf(node, graph.dir);
    const fingerprint = fingerprintOf(definition, observation.inputs, decision.upstream);
    this.#record({
      v: 1,
      id: node.id,
      status: 'ok',
      fingerprint,
      definition,
      inputs: Object.fromEntries(observation.inputs),
      ...recordedValues(node),
      upstream: decision.upstream,
      outputs: outputHashes,
      outputHash,
      edges: { needs: [...node.needs], after: [...node.after] },
      recipe: recipeOf(node),
      startedAt: startedAt.toISOString(),
      durationMs,
    });
    this.#removeStale(node, previous);
    emit({
      type: 'task-done',
      id: node.id,
      outcome: 'ran',
      durationMs,
      outputsChanged: previous?.status !== 'ok' || previous.outputHash !== outputHash,
      // What a command printed, as ninja shows it (a function's ctx.log went out as task-log events).
      ...(result.command !== undefined && result.output !== '' ? { command: result.command, output: result.output } : {}),
    });
    return 'ran';
  }

  /**
   * The outputs the task's last run made that it no longer declares (a renamed
   * file, a dropped drop-in) are removed once it ran, as a destroy would remove
   * them: a machine converges to what the Nodefile says, and a stale systemd
   * drop-in left behind would still be read. Not for a task that keeps its
   * outputs (`removeOutputs: false`), and never a path the project or the state
   * is in, nor one a task declares now (or that holds or lies in one). Nor one
   * outside the project that lies in the folder the task last ran in, when it
   * runs elsewhere now: that is a state copied with its project (`cp -r a b`),
   * whose records name the original's files, and those are the original's.
   */
  #removeStale(node: TaskNode, previous: TaskRecord | undefined): void {
    if (previous === undefined || node.decl.spec.removeOutputs === false) return;
    const { graph, guard, emit } = this.#options;
    const now = new Set(node.outputs);
    for (const old of Object.keys(previous.outputs)) {
      // Already gone (the project was moved, or someone removed it): nothing to remove or keep.
      if (now.has(old) || lstatSync(old, { throwIfNoEntry: false }) === undefined) continue;
      if (this.#declared === undefined) {
        const owners = new Map<string, TaskId>();
        for (const n of graph.ordered) for (const output of n.outputs) owners.set(output, n.id);
        this.#declared = new Claimed(owners);
      }
      const shown = path.relative(graph.dir, old) || old;
      // A file that now lies in a declared folder (the task's own, say) belongs to that folder's task;
      // and a path that is one of its outputs by another spelling (a symlink on the way) is one of them.
      const kept = keptBecause(old, guard, this.#declared, true) ?? sameAsOutput(old, node.outputs) ?? elsewhere(old, previous, node, graph.dir);
      if (kept !== undefined) {
        emit({ type: 'task-log', id: node.id, message: `kept ${shown}, no longer one of its outputs, which ${kept}` });
        continue;
      }
      const problem = removePath(old);
      emit({ type: 'task-log', id: node.id, message: problem ?? `removed ${shown}, no longer one of its outputs` });
    }
  }

  #record(record: TaskRecord, scrub = false): void {
    const { store, records } = this.#options;
    // Kept as where it went: nothing this run does reads it whole again.
    records.setWritten(record, store.append(record, scrub || this.#supersedesSecret(record.id)), store.readBack);
    failpoint(`after:${record.id}`);
    // A state that cannot be written must not be run ahead of.
    if (store.failure !== undefined) this.#hooks.stop();
  }

  /**
   * Whether the task's record about to be replaced holds a sensitive input's hash other
   * than its keyed digest now: that may be the plain SHA-256 a record made before keyed
   * digests holds, so the line is compacted away at the end of the run (StateStore.append).
   */
  #supersedesSecret(id: TaskId): boolean {
    const node = this.#options.graph.get(id);
    const observation = this.#options.observations.get(id);
    if (node === undefined || observation === undefined) return false;
    let previous: TaskRecord | undefined | null = null;
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      if (input.kind !== 'env' && (input.kind !== 'value' || input.sensitive !== true)) continue;
      if (previous === null) previous = this.#options.records.get(id);
      if (previous === undefined) return false;
      const before = Object.hasOwn(previous.inputs, name) ? previous.inputs[name] : undefined;
      if (before !== undefined && before !== observation.inputs.get(name)) return true;
    }
    return false;
  }
}

/** Whether `old` really is (or holds, or lies in) one of `outputs`, followed through symlinks. */
function sameAsOutput(old: string, outputs: readonly string[]): string | undefined {
  const resolved = realPath(old);
  if (resolved === undefined) return undefined;
  for (const output of outputs) {
    const now = realPath(output);
    if (now !== undefined && (holds(now, resolved) || holds(resolved, now))) return `is ${output} by another path`;
  }
  return undefined;
}

/** Why a stale output is left to the copy of the project the state came from (see removeStale), or undefined. */
function elsewhere(old: string, previous: TaskRecord, node: TaskNode, dir: string): string | undefined {
  const before = previous.recipe.cwd;
  if (before === node.cwd || holds(dir, old) || !holds(before, old)) return undefined;
  return `lies in ${before}, where the task last ran, outside this project: the state seems to come from a copy of the project there`;
}

/**
 * The hash a task's dependents see of what it made: its outputs, each named relative to
 * the project when it lies in it (so a project moved or copied elsewhere makes the same
 * hash, as its definition is the same), and the value it returned.
 */
function combineOutputs(
  node: TaskNode,
  dir: string,
  outputs: Record<string, ContentHash>,
  value: Json | undefined,
  startedAt: Date,
): ContentHash {
  const parts: string[] = [];
  for (const p of node.outputs) parts.push(holds(dir, p) ? path.relative(dir, p) : p, outputs[p]!);
  if (value !== undefined) parts.push('value', hashValue(value));
  // A task with nothing to compare stands for "it ran": its dependents follow every run.
  if (parts.length === 0) parts.push('stamp', node.id, startedAt.toISOString(), String(process.hrtime.bigint()));
  return hashParts(parts);
}

export function recipeOf(node: TaskNode): TaskRecord['recipe'] {
  const { spec } = node.decl;
  const list = (c: typeof spec.stop): string[][] => {
    if (c === undefined) return [];
    const many = Array.isArray(c) && c.length > 0 && typeof c[0] !== 'string' ? (c as readonly unknown[]) : [c];
    return many.map((one) =>
      typeof one === 'object' && one !== null && 'shell' in one ? ['/bin/sh', '-c', (one as { shell: string }).shell] : [...(one as string[])],
    );
  };
  return {
    cwd: node.cwd,
    remove: (spec.removeOutputs ?? true) === true ? [...node.outputs] : [],
    destroy: list(spec.destroy),
    stop: list(spec.stop),
    ...(spec.env === undefined ? {} : { env: { ...spec.env } }),
    ...(spec.retire === 'stop' ? { retire: 'stop' as const } : {}),
    ...(spec.timeout === undefined ? {} : { timeout: spec.timeout }),
  };
}

function failedRecord(
  node: TaskNode,
  graph: TaskGraph,
  previous: TaskRecord | undefined,
  startedAt: Date,
  durationMs: number,
  error: string,
): TaskRecord {
  return {
    v: 1,
    id: node.id,
    status: 'failed',
    fingerprint: previous?.fingerprint ?? hashParts(['failed']),
    definition: definitionOf(node, graph.dir),
    inputs: {},
    upstream: {},
    outputs: previous?.outputs ?? {},
    outputHash: hashParts(['failed', node.id, startedAt.toISOString()]),
    edges: { needs: [...node.needs], after: [...node.after] },
    recipe: recipeOf(node),
    startedAt: startedAt.toISOString(),
    durationMs,
    error,
  };
}

/** The value inputs a record keeps whole, so the next plan can say what changed in them key by key: not sensitive ones, nor large ones. */
function recordedValues(node: TaskNode): { values?: Record<string, Json> } {
  let values: Record<string, Json> | undefined;
  for (const name in node.inputs) {
    const input = node.inputs[name]!;
    if (!Object.hasOwn(node.inputs, name) || input.kind !== 'value' || input.sensitive === true) continue;
    if (canonicalJson(input.value).length > VALUE_RECORDED_MAX) continue;
    (values ??= Object.create(null) as Record<string, Json>)[name] = input.value;
  }
  return values === undefined ? {} : { values };
}
