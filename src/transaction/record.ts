// The transaction record of an atomic apply: `transaction.json` in the state
// folder, written durably (state of the art for one small file: a new file
// synced and renamed over) before each step, so a run after a crash knows
// what was under way and where the preserved copies are.
//
//   apply ──tasks settled──▶ health ──healthy──▶ commit ──▶ (removed)
//     │                        │
//     └──failed, Ctrl-C────────┴──▶ rollback ──done──▶ (removed)
//
// A run that finds one in apply, health or rollback rolls it back (or, with
// `apply --continue`, finishes the change); in commit, the change was healthy
// and the commit is finished.

import { readFileSync, rmSync, unlinkSync } from 'node:fs';
import { transactionDir, transactionPath } from '../state/transaction-files.ts';
import path from 'node:path';
import { writeDurably } from '../util/durable.ts';
import { failpoint } from '../util/failpoint.ts';
import { err, ok, type Result } from '../util/result.ts';
import type { Failure } from '../error.ts';

type TransactionUnreadable = Extract<Failure, { reason: 'transaction-unreadable' }>;

export const TRANSACTION_FORMAT = 'nodegraph-transaction';

export type Phase = 'apply' | 'health' | 'rollback' | 'commit';

export interface Transaction {
  readonly format: typeof TRANSACTION_FORMAT;
  readonly version: 1;
  /** The generation the machine was at; null before the first. */
  readonly from: number | null;
  /** The generation being applied (its manifest is written before the transaction). */
  readonly to: number;
  readonly phase: Phase;
  readonly startedAt: string;
  readonly command: string;
  /** Where the preserved paths were saved. */
  readonly preserved: string;
  /** Each task recorded when the transaction began → what its record was (status, fingerprint, output hash, start). */
  readonly before: Readonly<Record<string, string>>;
  /** Why it is being rolled back. */
  readonly cause?: string;
}

export { transactionDir, transactionPath } from '../state/transaction-files.ts';

/** The unfinished transaction, if any; one that cannot be read is an error to report, never ignored. */
export function readTransaction(stateDir: string): Result<Transaction | undefined, [TransactionUnreadable]> {
  const file = transactionPath(stateDir);
  const unreadable = (message: string): { ok: false; error: [TransactionUnreadable] } => err([{ reason: 'transaction-unreadable', path: file, message }]);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return ok(undefined);
    return unreadable((error as Error).message);
  }
  try {
    const parsed = JSON.parse(text) as Transaction;
    if (parsed.format !== TRANSACTION_FORMAT || typeof parsed.to !== 'number') return unreadable('not a nodegraph transaction record');
    return ok(parsed);
  } catch (error) {
    return unreadable((error as Error).message);
  }
}

export function writeTransaction(stateDir: string, transaction: Transaction): void {
  writeDurably(transactionPath(stateDir), `${JSON.stringify(transaction)}\n`);
  failpoint(transaction.phase);
}

export function clearTransaction(stateDir: string): void {
  // unlink, not rmSync: Node's rmSync reports a read-only file system with no errno code.
  try {
    unlinkSync(transactionPath(stateDir));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  rmSync(transactionDir(stateDir), { recursive: true, force: true });
}

