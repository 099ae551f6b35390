// What the executor and teardown write through: an append that never throws
// and remembers the first failure, so a run stops rather than runs ahead of
// a state it can no longer write.

import { dirname } from 'node:path';
import type { Failure } from '../error.ts';
import type { StoredRecord } from '../state/record.ts';
import type { Appended, StateStore } from '../state/store.ts';
import type { Result } from '../util/result.ts';

export interface Appender {
  /** Where the record went (StateStore.append), or undefined when that is not known (a failed write). */
  append(record: StoredRecord, scrub?: boolean): Appended | undefined;
  /** A record's text read back from where `append` said it went (StateStore.readBack). */
  readBack(where: Appended): string | undefined;
  sync(): void;
  readonly failure: Failure | undefined;
  /** Whether anything was appended: a run that appended nothing has nothing to compact. */
  readonly appended: boolean;
}

export function appender(store: StateStore): Appender {
  let failure: Failure | undefined;
  let appended = false;
  const remember = <T>(result: Result<T, unknown>): T | undefined => {
    if (result.ok) return result.value;
    if (failure !== undefined) return undefined;
    const e = result.error as { reason: string; path: string; message: string; detail?: string };
    failure = e.reason === 'state-unreadable'
      ? { reason: 'state-unreadable', path: e.path, message: e.message }
      : {
          reason: 'state-dir-unwritable',
          // An unwritable error names the folder already; a failed write names the journal in it.
          path: e.reason === 'state-dir-unwritable' ? e.path : dirname(e.path),
          message: `${e.detail ?? e.message}; the run stopped there, and a task whose record was lost is done again next time`,
        };
    return undefined;
  };
  return {
    append: (record, scrub) => {
      appended = true;
      return failure === undefined ? remember(store.append(record, scrub)) : undefined;
    },
    readBack: (where) => store.readBack(where),
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
