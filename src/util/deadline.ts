// A task's `timeout`: a signal that aborts with the run's own (Ctrl-C) or when the
// time is up, and a race against the time, for a function that does not heed its
// signal.

import { parseDuration } from './duration.ts';

export interface Deadline {
  /** Aborts on the run's signal, or when the time is up. */
  readonly signal: AbortSignal;
  /** What `work` gives, or undefined once the time is up (not waiting for it then). */
  race<T>(work: T | Promise<T>): Promise<T | undefined>;
  timedOut(): boolean;
  /** Clears the timer: the work answered. */
  done(): void;
}

/** The deadline of `timeout` (a duration, or milliseconds) under `outer`; undefined without a timeout. */
export function deadline(outer: AbortSignal, timeout: string | number | undefined): Deadline | undefined {
  const ms = typeof timeout === 'string' ? parseDuration(timeout) : timeout;
  if (ms === undefined) return undefined;
  const cut = new AbortController();
  let out = false;
  let expire = (): void => {};
  const expired = new Promise<void>((resolve) => (expire = resolve));
  const timer = setTimeout(() => {
    out = true;
    cut.abort();
    expire();
  }, Math.max(0, ms));
  const stop = (): void => cut.abort();
  if (outer.aborted) cut.abort();
  else outer.addEventListener('abort', stop, { once: true });
  return {
    signal: cut.signal,
    race: (work) => Promise.race([work, expired.then(() => undefined)]),
    timedOut: () => out,
    done: () => {
      clearTimeout(timer);
      outer.removeEventListener('abort', stop);
    },
  };
}
