// nodegraph as a library: the Nodefile types (a Nodefile needs only these,
// as a type-only import) and the operations behind the commands.

export type {
  Argv,
  CheckFunction,
  Command,
  ExecOptions,
  ExecResult,
  InputSpec,
  Json,
  Nodefile,
  NodefileApi,
  SourceSite,
  TaskContext,
  TaskFunction,
  TaskInput,
  TaskRef,
  TaskSpec,
} from './nodefile/types.ts';
export type { Failure, FailureReason } from './error.ts';
export type { EngineEvent, TaskOutcome } from './events.ts';
export type { ProcessRunner, RunOptions, RunResult } from './process-runner.ts';
export type { Plan, PlanEntry } from './plan/plan.ts';
export type { EngineOptions } from './engine.ts';
export { applyNodefile, planNodefile, teardownNodefile, type ApplySummary, type PlanResult, type TeardownResult } from './operations.ts';
export { LocalRunner } from './execute/runner.ts';
