// Readiness waits: poll a probe at an interval until it holds or a timeout
// passes. A timeout is an expected outcome, so it comes back as a value that
// carries the last probe's output; `waitOrThrow` turns it into a task failure.

import { setTimeout as sleepFor } from 'node:timers/promises';
import { err, ok, type Result } from '../util/result.ts';

export interface ProbeResult {
  readonly ok: boolean;
  /** What was seen will not come right by waiting (a service that keeps failing): give up now. */
  readonly hopeless?: boolean;
  /** What the probe saw, in a line: shown when the wait gives up. */
  readonly detail: string;
}

export type Probe = () => Promise<ProbeResult> | ProbeResult;

/** Time, swappable so tests need not wait. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) => sleepFor(ms, undefined, signal === undefined ? {} : { signal }),
};

export interface WaitOptions {
  /** What is awaited, for the message: `systemd in kube1`. */
  readonly what: string;
  readonly timeoutMs: number;
  readonly intervalMs: number;
  readonly signal?: AbortSignal;
  readonly clock?: Clock;
}

export interface WaitTimeout {
  readonly reason: 'wait-timeout' | 'wait-canceled' | 'wait-hopeless';
  readonly what: string;
  readonly waitedMs: number;
  readonly attempts: number;
  readonly lastDetail: string;
}

export async function waitFor(probe: Probe, options: WaitOptions): Promise<Result<{ attempts: number; waitedMs: number }, WaitTimeout>> {
  const clock = options.clock ?? realClock;
  const start = clock.now();
  let attempts = 0;
  let lastDetail = '';
  while (true) {
    attempts++;
    let result: ProbeResult;
    try {
      result = await probe();
    } catch (error) {
      result = { ok: false, detail: error instanceof Error ? error.message : String(error) };
    }
    if (result.ok) return ok({ attempts, waitedMs: clock.now() - start });
    lastDetail = result.detail;
    const waited = clock.now() - start;
    if (result.hopeless === true) return err({ reason: 'wait-hopeless', what: options.what, waitedMs: waited, attempts, lastDetail });
    if (options.signal?.aborted) return err({ reason: 'wait-canceled', what: options.what, waitedMs: waited, attempts, lastDetail });
    if (waited >= options.timeoutMs) return err({ reason: 'wait-timeout', what: options.what, waitedMs: waited, attempts, lastDetail });
    const pause = Math.min(options.intervalMs, options.timeoutMs - waited);
    try {
      await clock.sleep(pause, options.signal);
    } catch {
      return err({ reason: 'wait-canceled', what: options.what, waitedMs: clock.now() - start, attempts, lastDetail });
    }
  }
}

export function describeWaitFailure(failure: WaitTimeout): string {
  const seconds = (failure.waitedMs / 1000).toFixed(1);
  const last = failure.lastDetail === '' ? '' : `; last probe: ${failure.lastDetail}`;
  switch (failure.reason) {
    case 'wait-canceled':
      return `canceled while waiting for ${failure.what}${last}`;
    case 'wait-hopeless':
      return `gave up after ${seconds}s (${failure.attempts} probes) waiting for ${failure.what}: ${failure.lastDetail}`;
    case 'wait-timeout':
      return `timed out after ${seconds}s (${failure.attempts} probes) waiting for ${failure.what}${last}`;
  }
}

/** Waits, or throws an Error whose message carries the last probe's output (a task failure). */
export async function waitOrThrow(probe: Probe, options: WaitOptions): Promise<void> {
  const result = await waitFor(probe, options);
  if (!result.ok) throw new Error(describeWaitFailure(result.error));
}
