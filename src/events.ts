// What the engine says while it works. It never prints: reporters in
// src/report/ turn these into a terminal view, plain lines or JSON.

import type { TaskId } from './ids.ts';
import type { Plan } from './plan/plan.ts';

export type TaskOutcome = 'ran' | 'failed' | 'skipped' | 'canceled' | 'up-to-date';

export type EngineEvent =
  | { readonly type: 'plan'; readonly plan: Plan }
  | { readonly type: 'warning'; readonly message: string }
  | { readonly type: 'task-start'; readonly id: TaskId; readonly verb: string; readonly reason: string; readonly command: string | undefined }
  | { readonly type: 'task-log'; readonly id: TaskId; readonly message: string }
  /** The last line a running command printed, said now and then for the live view (not in the JSON events). */
  | { readonly type: 'task-progress'; readonly id: TaskId; readonly line: string }
  | {
      readonly type: 'task-done';
      readonly id: TaskId;
      readonly outcome: TaskOutcome;
      readonly durationMs: number;
      /** For 'ran': whether the outputs came out different (false = early cutoff). */
      readonly outputsChanged?: boolean;
      /** For 'failed': what failed, the command, and its buffered output; for 'ran', a command's output when it printed any. */
      readonly error?: string;
      readonly command?: string;
      readonly output?: string;
      /** For 'failed': the command's exit code, when it exited (a signal, a spawn failure or a function has none). */
      readonly exitCode?: number;
      /** For 'skipped': the upstream task that failed. */
      readonly because?: TaskId;
      /** Where the whole output is kept (`<state>/logs/tasks/`), added by the CLI (src/report/recap.ts). */
      readonly log?: string;
    }
  /** `total`: how many tasks the teardown it is part of settles (a destroy without a plan counts against it). */
  | { readonly type: 'destroy-start'; readonly id: TaskId; readonly command: string | undefined; readonly total?: number }
  | {
      readonly type: 'destroy-done';
      readonly id: TaskId;
      readonly outcome: 'destroyed' | 'failed' | 'canceled' | 'kept' | 'skipped';
      /** What was run: its stop commands only, or its stop and destroy commands (absent for 'skipped'). */
      readonly action?: 'stop' | 'destroy';
      readonly error?: string;
      readonly output?: string;
      /** For 'failed': the failed command's exit code, when it exited. */
      readonly exitCode?: number;
      readonly because?: string;
      readonly log?: string;
    }
  /** A step of an atomic apply: saving, health, commit, rollback. */
  | { readonly type: 'transaction'; readonly message: string }
  | { readonly type: 'summary'; readonly command: 'apply' | 'destroy' | 'stop'; readonly counts: Readonly<Record<string, number>>; readonly durationMs: number };

export type EventSink = (event: EngineEvent) => void;

/** Where a run's events go: the caller's sink, or nowhere. */
export const sinkOf = (options: { readonly onEvent?: EventSink | undefined }): EventSink => options.onEvent ?? (() => {});
