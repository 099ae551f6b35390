// The write-ahead log of an atomic apply: before a task's action starts, its
// intent (id, teardown recipe, edges, declared outputs) is appended to
// `<state>/transaction/intents` and synced. A kill can fall between an action's
// effect and its record; the intent is already on disk then, so the rollback
// knows the task may have touched the machine and undoes what is there with
// the task's own actions, record or not.
//
// One JSON line per intent. A torn last line is an intent whose append never
// finished, so its action never started: it is skipped.

import { closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { TaskId } from '../ids.ts';
import { standInRecord } from '../observe/traces.ts';
import type { TaskRecord } from '../state/record.ts';
import { fsyncDir } from '../util/fsync.ts';

export interface Intent {
  readonly id: TaskId;
  readonly recipe: TaskRecord['recipe'];
  readonly edges: TaskRecord['edges'];
  /** Declared outputs, absolute: where to look for what the action left. */
  readonly outputs: readonly string[];
}

export const intentsPath = (transactionDir: string): string => path.join(transactionDir, 'intents');

/** Appends intents durably: each is on disk before `record` returns. */
export class IntentLog {
  readonly #file: string;
  #fd: number | undefined;
  /** Tasks whose intent is on disk already: a task retried in the same transaction is written once. */
  readonly #written = new Set<TaskId>();

  constructor(transactionDir: string) {
    this.#file = intentsPath(transactionDir);
    for (const id of readIntents(transactionDir).keys()) this.#written.add(id);
  }

  /** Throws when the intent cannot be made durable: the action must not start then. */
  record(intent: Intent): void {
    if (this.#written.has(intent.id)) return;
    if (this.#fd === undefined) {
      mkdirSync(path.dirname(this.#file), { recursive: true });
      this.#fd = openSync(this.#file, 'a', 0o600);
      fsyncDir(path.dirname(this.#file));
    }
    const line = Buffer.from(`${JSON.stringify(intent)}\n`);
    for (let at = 0; at < line.length; ) at += writeSync(this.#fd, line, at, line.length - at);
    fsyncSync(this.#fd);
    this.#written.add(intent.id);
  }

  close(): void {
    if (this.#fd !== undefined) closeSync(this.#fd);
    this.#fd = undefined;
  }
}

/** The intents a transaction wrote, by task; none when there is no log. */
export function readIntents(transactionDir: string): Map<TaskId, Intent> {
  const intents = new Map<TaskId, Intent>();
  let text: string;
  try {
    text = readFileSync(intentsPath(transactionDir), 'utf8');
  } catch {
    return intents;
  }
  for (const line of text.split('\n')) {
    if (line === '') continue;
    try {
      const intent = JSON.parse(line) as Intent;
      if (typeof intent.id === 'string' && typeof intent.recipe === 'object' && Array.isArray(intent.outputs)) intents.set(intent.id, intent);
    } catch {
      // a torn last line: that append never finished, so its action never started
    }
  }
  return intents;
}

/** Whether an intended task may have left something to undo: an output in place, or actions of its own to run. */
export function mayHaveLeft(intent: Intent): boolean {
  if (intent.recipe.stop.length > 0 || intent.recipe.destroy.length > 0) return true;
  return intent.outputs.some((p) => {
    try {
      lstatSync(p);
      return true;
    } catch {
      return false;
    }
  });
}

/** A stand-in record for a task whose intent is known but whose run was never recorded: enough to tear it down. */
export function intendedRecord(intent: Intent): TaskRecord {
  return standInRecord(intent.id, intent.edges, intent.recipe, 'intended: its action may have started, never recorded');
}
