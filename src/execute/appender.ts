// What the executor and teardown write through: an append that never throws
// and remembers the first failure, so a run stops rather than runs ahead of
// a state it can no longer write.

import { dirname } from 'node:path';
import type { Failure } from '../error.ts';
import type { StoredRecord } from '../state/record.ts';
import type { StateStore } from '../state/store.ts';

export interface Appender {
  append(record: StoredRecord): void;
  sync(): void;
  readonly failure: Failure | undefined;
  /** Whether anything was appended (state/seal.ts seals only a run that appended nothing). */
  readonly appended: boolean;
}

export function appender(store: StateStore): Appender {
  let failure: Failure | undefined;
  let appended = false;
  const remember = (result: { ok: boolean; error?: unknown }): void => {
    if (result.ok || failure !== undefined) return;
    const e = result.error as { reason: string; path: string; message: string };
    failure = e.reason === 'state-unreadable'
      ? { reason: 'state-unreadable', path: e.path, message: e.message }
      : {
          reason: 'state-dir-unwritable',
          path: dirname(e.path),
          message: `${e.message}; the run stopped there, and a task whose record was lost is done again next time`,
        };
  };
  return {
    append: (record) => {
      appended = true;
      if (failure === undefined) remember(store.append(record));
    },
    // A run that recorded nothing has nothing to make durable: a no-op writes no state.
    sync: () => {
      if (appended) remember(store.sync());
    },
    get appended() {
      return appended;
    },
    get failure() {
      return failure;
    },
  };
}
