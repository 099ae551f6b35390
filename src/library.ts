// nodegraph as a library (`nodegraph/library`): the operations behind the
// commands and the types they take. Its declarations need @types/node.

export type * from './index.ts';
export type { Failure, FailureReason } from './error.ts';
export type { EngineEvent, TaskOutcome } from './events.ts';
export type { ProcessRunner, RunOptions, RunResult } from './process-runner.ts';
export type { Plan, PlanEntry } from './plan/plan.ts';
export type { EngineOptions } from './engine.ts';
export { applyNodefile, type ApplySummary } from './apply.ts';
export { planNodefile, teardownNodefile, type PlanResult, type TeardownResult } from './operations.ts';
export { LocalRunner } from './execute/runner.ts';
