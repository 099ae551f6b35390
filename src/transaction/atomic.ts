// An atomic apply's transaction, step by step: begin (the new generation's
// sources stored, the preserved paths saved, the record written), then the
// apply itself (operations.ts), then commit — or roll back: stop what the apply
// started, destroy what it created, restore the preserved paths, and apply the
// previous generation again from its stored sources and check it. Each step is
// recorded (record.ts) before it is taken and can be taken again, so a run
// after a crash finishes what this one began.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { TaskGraph } from '../graph/graph.ts';
import type { EventSink } from '../events.ts';
import type { Failure } from '../error.ts';
import type { TaskId } from '../ids.ts';
import { teardownOrder } from '../plan/teardown.ts';
import type { Records, RecordTable } from '../state/records.ts';
import { err, ok, type Result } from '../util/result.ts';
import { describeRestored, GenerationStore, type GenerationError } from './generations.ts';
import type { Generation, Sources } from './manifest.ts';
import type { Health } from './health.ts';
import { intendedRecord, mayHaveLeft, readIntents, type Intent } from './intents.ts';
import { readPreserved, restorePreserved, savePreserved } from './preserve.ts';
import { failpoint } from '../util/failpoint.ts';
import { clearTransaction, transactionDir, transactionPath, writeTransaction, type Transaction } from './record.ts';
import { errnoWords } from '../state/errors.ts';

/** A task's record as a transaction compares it: any run, stop or change since gives another string. */
function identity(records: Records, id: TaskId): string {
  const r = records.get(id);
  return r === undefined ? '' : `${r.status}:${r.error ?? ''}:${r.fingerprint}:${r.outputHash}:${r.startedAt}`;
}

export interface Begin {
  readonly stateDir: string;
  readonly store: GenerationStore;
  readonly records: Records;
  readonly sources: Sources;
  readonly preserve: readonly string[];
  readonly command: string;
}

/**
 * Begins a transaction: the generation it applies (`to`) is stored as
 * pending, the preserved paths saved, and the record written. Any failure
 * here (a full disk) leaves the machine untouched: nothing has run.
 */
export function beginTransaction(begin: Begin): Result<Transaction, Failure> {
  const { stateDir, store } = begin;
  // A pending generation with no transaction is what a crash before the record left: debris.
  store.dropPending();
  const from = store.current() ?? null;
  // The same sources as the current generation (a repair of drift): that generation again. `current`
  // holds its digest; only one written without it has the manifest read.
  const digest = from === null ? undefined : (store.currentDigest() ?? store.read(from)?.digest);
  const to = from !== null && digest === begin.sources.digest ? from : store.next();
  if (to !== from) {
    const recorded = store.record(to, begin.sources, { status: 'pending' });
    if (!recorded.ok) return err({ reason: 'transaction-not-started', message: generationProblem(recorded.error) });
  }
  failpoint('prepare');
  const dir = path.join(transactionDir(stateDir), 'preserved');
  const saved = savePreserved(begin.preserve, dir);
  failpoint('preserved');
  if (!saved.ok) {
    clearTransaction(stateDir);
    store.dropPending();
  }
  if (!saved.ok) return err({ reason: 'transaction-not-started', message: `could not save the preserved path ${saved.error.path}: ${saved.error.message}` });
  const before: Record<string, string> = {};
  for (const id of begin.records.keys()) before[id] = identity(begin.records, id);
  const transaction: Transaction = {
    format: 'nodegraph-transaction',
    version: 1,
    from,
    to,
    phase: 'apply',
    startedAt: new Date().toISOString(),
    command: begin.command,
    preserved: dir,
    before,
  };
  try {
    mkdirSync(stateDir, { recursive: true });
    writeTransaction(stateDir, transaction);
  } catch (error) {
    clearTransaction(stateDir);
    store.dropPending();
    return err({ reason: 'transaction-not-started', message: `could not record the transaction: ${(error as Error).message}` });
  }
  return ok(transaction);
}

/**
 * Moves the transaction to its next phase, durably; or why it could not (a
 * full disk), the phase recorded before standing for the next run to act on.
 */
export function advance(stateDir: string, transaction: Transaction, phase: Transaction['phase'], cause?: string): Result<Transaction, string> {
  const next: Transaction = { ...transaction, phase, ...(cause === undefined ? {} : { cause }) };
  try {
    writeTransaction(stateDir, next);
  } catch (error) {
    return err(`${path.basename(transactionPath(stateDir))}: ${errnoWords(error)}`);
  }
  return ok(next);
}

/** A commit left unfinished, and what the next apply does with it. */
export interface Unfinished {
  /** The folder that would not take the write: the generations' or the state's. */
  readonly path: string;
  readonly problem: string;
  readonly next: 'finishes it' | 'rolls it back';
}

/**
 * The change held: its generation is current, the saved copies go. When its
 * manifest cannot be written, the transaction stays in its commit phase for
 * the next run to finish; when the commit phase itself cannot be recorded, in
 * its health phase, which the next run rolls back.
 */
export function commit(
  stateDir: string,
  store: GenerationStore,
  transaction: Transaction,
  what: { ran: readonly string[]; destroyed: readonly string[]; keep: number },
): Unfinished | undefined {
  const advanced = transaction.phase === 'commit' ? ok(transaction) : advance(stateDir, transaction, 'commit');
  if (!advanced.ok) return { path: stateDir, problem: `could not record the commit (${advanced.error})`, next: 'rolls it back' };
  const committing = advanced.value;
  if (committing.to !== committing.from) {
    const marked = store.mark(committing.to, 'applied', { ran: what.ran, destroyed: what.destroyed });
    if (!marked.ok) return { path: store.dir, problem: generationProblem(marked.error), next: 'finishes it' };
    const set = store.setCurrent(marked.value);
    if (!set.ok) return { path: store.dir, problem: generationProblem(set.error), next: 'finishes it' };
  }
  failpoint('committed');
  const kept = end(stateDir);
  if (kept !== undefined) return { path: stateDir, problem: kept, next: 'finishes it' };
  store.prune(what.keep);
  return undefined;
}

/** Tears down the given tasks of the records it was handed, in teardown order; what did not go. */
export type Teardown = (order: readonly TaskId[], mode: 'stop' | 'destroy') => Promise<{ readonly failed: readonly TaskId[]; readonly kept: readonly TaskId[] }>;

export interface RollbackContext {
  readonly stateDir: string;
  readonly store: GenerationStore;
  readonly emit: EventSink;
  /**
   * Opens the state, hands `body` its records and a teardown bound to them,
   * and closes it again; what went wrong, as lines for `left`.
   */
  readonly undo: (body: (records: RecordTable, teardown: Teardown) => Promise<string[]>) => Promise<string[]>;
  /**
   * Applies the Nodefile as it now is (its sources just restored), whole and
   * not atomically, and gives the graph it applied, or what went wrong.
   */
  readonly reapply: (env: Readonly<Record<string, string | null>>, signal: AbortSignal) => Promise<Result<TaskGraph, string>>;
  /** Waits for a graph's health (transaction/health.ts). */
  readonly healthy: (graph: TaskGraph, signal: AbortSignal) => Promise<Health>;
}

export interface RollbackOutcome {
  readonly ok: boolean;
  /** What could not be put back, when not ok. */
  readonly left: readonly string[];
}

/**
 * Rolls a transaction back. Every step can be taken again after a crash:
 * what is already stopped, destroyed or restored is left as it is.
 *
 * What to undo is reconciled with the machine, not read from the journal
 * alone: a task whose intent was written (intents.ts) may have acted though
 * no record says so, so it is stopped (it was there before) or torn down with
 * its own recipe (it is new), record or not.
 */
export async function rollBack(context: RollbackContext, begun: Transaction, cause: string): Promise<RollbackOutcome> {
  const { stateDir, store, emit } = context;
  const advanced = begun.phase === 'rollback' ? ok(begun) : advance(stateDir, begun, 'rollback', cause);
  if (!advanced.ok) return { ok: false, left: [`could not record the rollback (${advanced.error}): nothing was undone`] };
  const transaction = advanced.value;
  // A fresh signal: the first Ctrl-C stopped the apply; the rollback must still run (a second quits).
  const signal = new AbortController().signal;
  // The generation to go back to is checked whole before anything is stopped: one that cannot be applied
  // again leaves the machine as the apply left it, rather than undone and not brought back.
  let back: { readonly generation: Generation; readonly env: Record<string, string | null> } | undefined;
  if (transaction.from !== null) {
    const refused = (error: GenerationError): RollbackOutcome => ({
      ok: false,
      left: [`${generationProblem(error)}: nothing was undone (\`nodegraph apply --continue\` finishes the apply instead)`],
    });
    const usable = store.verify(transaction.from);
    if (!usable.ok) return refused(usable.error);
    const env = store.env(transaction.from);
    if (!env.ok) return refused(env.error);
    back = { generation: usable.value, env: env.value };
  }
  const intents = readIntents(transactionDir(stateDir));
  const left: string[] = await context.undo(async (records, teardown) => {
    const problems: string[] = [];
    const { created, changed } = touched(transaction, records, intents);
    if (changed.length > 0) {
      emit({ type: 'transaction', message: `rollback: stopping what this apply changed (${changed.length})` });
      const stopped = await teardown(teardownOrder(changed, records), 'stop');
      for (const id of stopped.failed) problems.push(`${id} could not be stopped`);
    }
    if (created.length > 0) {
      emit({ type: 'transaction', message: `rollback: destroying what this apply created (${created.length})` });
      const destroyed = await teardown(teardownOrder(created, records), 'destroy');
      for (const id of [...destroyed.failed, ...destroyed.kept]) problems.push(`${id} could not be destroyed`);
    }
    return problems;
  });

  const preserved = readPreserved(transaction.preserved);
  if (!preserved.ok && left.length === 0) left.push(`the preserved copies in ${transaction.preserved} ${preserved.error}: nothing was restored from them`);
  if (preserved.ok && preserved.value.paths.length > 0) {
    const { paths } = preserved.value;
    emit({ type: 'transaction', message: `rollback: restoring ${paths.length} preserved path${paths.length === 1 ? '' : 's'}` });
    for (const problem of restorePreserved(preserved.value)) left.push(`preserved ${problem}`);
  }

  if (transaction.from !== null && back !== undefined) {
    const restored = store.restore(transaction.from, back.generation);
    if (!restored.ok) left.push(generationProblem(restored.error));
    else {
      const changed = describeRestored(restored.value, path.dirname(back.generation.nodefile));
      emit({ type: 'transaction', message: `rollback: applying generation ${transaction.from} again${changed === '' ? '' : ` (${changed})`}` });
      const applied = await context.reapply(back.env, signal);
      if (!applied.ok) left.push(`generation ${transaction.from} did not apply again: ${applied.error}`);
      else {
        const health = await context.healthy(applied.value, signal);
        if (!health.ok) left.push(`generation ${transaction.from} is not healthy again: ${health.task}: ${health.detail}`);
      }
    }
  }
  if (left.length > 0) return { ok: false, left };
  failpoint('rolled-back');
  if (transaction.to !== transaction.from) store.mark(transaction.to, 'failed');
  const kept = end(stateDir);
  if (kept !== undefined) return { ok: false, left: [`the rollback is done, but ${kept}: the next apply takes it again`] };
  return { ok: true, left: [] };
}

/** Removes the transaction's record, its last step; or why it could not (the record then stands for the next run). */
function end(stateDir: string): string | undefined {
  try {
    clearTransaction(stateDir);
    return undefined;
  } catch (error) {
    return `could not remove ${path.basename(transactionPath(stateDir))} (${errnoWords(error)})`;
  }
}

/**
 * What a transaction may have touched, by the records and the intents: tasks
 * that were recorded when it began and changed or were meant to run (to
 * stop), and tasks it made (to destroy) — an intended one with no record
 * stands in by its intent when it may have left something.
 */
function touched(transaction: Transaction, records: RecordTable, intents: ReadonlyMap<TaskId, Intent>): { created: TaskId[]; changed: TaskId[] } {
  const before = transaction.before;
  const created: TaskId[] = [];
  const changed: TaskId[] = [];
  for (const id of records.keys()) {
    if (!Object.hasOwn(before, id)) created.push(id);
    else if (before[id] !== identity(records, id) || intents.has(id)) changed.push(id);
  }
  for (const [id, intent] of intents) {
    if (records.has(id) || Object.hasOwn(before, id) || !mayHaveLeft(intent)) continue;
    records.set(intendedRecord(intent));
    created.push(id);
  }
  return { created, changed };
}

export function generationProblem(error: GenerationError): string {
  switch (error.reason) {
    case 'generation-missing':
      return `there is no generation ${error.number} (known: ${error.known.join(', ') || 'none'})`;
    case 'generation-damaged':
      return `generation ${error.number} is damaged: ${error.path}: ${error.message}`;
    case 'generation-file-changed':
      return `generation ${error.number} needs ${error.path} at sha256:${error.sha256.slice(0, 12)}…, which has changed`;
    case 'generation-write-failed':
      return `could not write ${error.path}: ${error.message}`;
    case 'generation-would-overwrite':
      return `generation ${error.number} would write over ${error.paths.join(', ')}, whose content no other kept generation holds`;
  }
}
