// Where an atomic apply keeps its record and folder in the state folder, and
// the transaction folder without its record: what a run killed between
// saving the preserved copies and writing transaction.json (beginTransaction)
// left, or one killed while clearing a finished transaction (the record goes
// first). Either way no transaction refers to it: it is debris, which the next
// holder of the lock removes and `status` reports when it sees it without the
// lock.

import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';

/** Where an atomic apply's record (transaction/record.ts) and its folder (preserved copies, intents) live. */
export const transactionPath = (stateDir: string): string => path.join(stateDir, 'transaction.json');
export const transactionDir = (stateDir: string): string => path.join(stateDir, 'transaction');

/** The transaction folder when transaction.json is not there; undefined otherwise. */
export function orphanedTransaction(stateDir: string): string | undefined {
  const dir = transactionDir(stateDir);
  return existsSync(dir) && !existsSync(transactionPath(stateDir)) ? dir : undefined;
}

/**
 * Removes an orphaned transaction folder; its path when there was one. Only
 * for the holder of the lock: a live run may be between the two steps.
 */
export function removeOrphanedTransaction(stateDir: string): string | undefined {
  const dir = orphanedTransaction(stateDir);
  if (dir === undefined) return undefined;
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // still there: the next run tries again, and status reports it
    return undefined;
  }
  return dir;
}
