// How far a run is, as ninja's status line counts it: `[done/total]`. The
// total is what the plan says will act (orphans to destroy included); a
// teardown without a plan, or after a step of an atomic apply, counts against
// the total its starts say.

import type { EngineEvent } from '../events.ts';

export class Progress {
  total = 0;
  done = 0;
  running = 0;
  /** Whether a plan said the total (an apply); without one, a teardown's starts say it. */
  #planned = false;
  /** The first task that failed, which stops a run without -k. */
  firstFailed: string | undefined;
  readonly startedAt: number;

  constructor(now: number = Date.now()) {
    this.startedAt = now;
  }

  /** Counts one event; a new plan (the next run of `watch`) starts the count again. */
  see(event: EngineEvent): void {
    switch (event.type) {
      case 'plan':
        this.total = event.plan.size - event.plan.counts.unchanged;
        this.#planned = true;
        this.done = 0;
        this.running = 0;
        this.firstFailed = undefined;
        break;
      case 'transaction':
        // A step of an atomic apply (a rollback's teardown, a retirement) counts against its own total.
        this.#planned = false;
        this.total = 0;
        this.done = 0;
        this.running = 0;
        break;
      case 'destroy-start':
        if (!this.#planned && event.total !== undefined) this.total = Math.max(this.total, event.total);
        this.running++;
        break;
      case 'task-start':
        this.running++;
        break;
      case 'task-done':
      case 'destroy-done':
        // A skipped task never started; an up-to-date one (early cutoff) neither.
        if (this.running > 0 && (event.type === 'destroy-done' ? event.outcome !== 'skipped' : event.outcome !== 'skipped' && event.outcome !== 'up-to-date')) this.running--;
        this.done++;
        this.total = Math.max(this.total, this.done + this.running);
        if (event.outcome === 'failed') this.firstFailed ??= event.id;
        break;
      default:
        break;
    }
  }

  /** Why a task was skipped: the upstream that did not succeed, else what stopped the run. */
  skipped(because: string | undefined): string {
    if (because !== undefined) return `${because} did not succeed`;
    return this.firstFailed === undefined ? 'the run stopped first' : `the run stopped after ${this.firstFailed} failed`;
  }

  /** `[3/7]`: the tasks settled and the tasks to settle. */
  counter(): string {
    return `[${this.done}/${Math.max(this.total, this.done + this.running)}]`;
  }
}

/** `12ms`, `1.2s`, `3m04s`: short, and steady in width while it counts up. */
export function seconds(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}
