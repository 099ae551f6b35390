// The health of a graph after an atomic apply, as greenboot's required checks:
// each task marked `health` must see its check pass within `within` and keep
// passing for `stable`. Without one, healthy means every check passes now.

import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { runCheck } from '../observe/check.ts';
import { taskContext } from '../observe/context.ts';
import type { ProcessRunner } from '../process-runner.ts';
import { deadline } from '../util/deadline.ts';
import { parseDuration } from '../util/duration.ts';

export type Health = { readonly ok: true } | { readonly ok: false; readonly task: string; readonly detail: string };

/** The health poll's time: EngineOptions.now and .sleep when a test sets them, the wall clock and a timer otherwise. */
export interface HealthClock {
  readonly now?: (() => bigint) | undefined;
  readonly sleep?: ((ms: number) => Promise<void>) | undefined;
}

export function healthTasks(graph: TaskGraph): TaskNode[] {
  return graph.ordered.filter((n) => n.decl.spec.health !== undefined);
}

export async function waitHealthy(graph: TaskGraph, runner: ProcessRunner, signal: AbortSignal, jobs: number, stateDir: string, clock: HealthClock = {}): Promise<Health> {
  const marked = healthTasks(graph);
  if (marked.length === 0) return everyCheck(graph, runner, signal, jobs);
  const verdicts = await Promise.all(
    marked.map(async (node) => {
      const verdict = await watch(node, runner, signal, clock);
      return verdict.ok ? verdict : { ...verdict, detail: withKept(verdict.detail, await onFailure(node, runner, stateDir)) };
    }),
  );
  return verdicts.find((v) => !v.ok) ?? { ok: true };
}

const withKept = (detail: string, kept: string | undefined): string => (kept === undefined || kept === '' ? detail : `${detail}; ${kept}`);

/** A health task's onFailure, run once with a fresh signal (an interrupted apply still keeps what it can); what it says, or why it failed. */
async function onFailure(node: TaskNode, runner: ProcessRunner, stateDir: string | undefined): Promise<string | undefined> {
  const hook = node.decl.spec.health?.onFailure;
  if (hook === undefined) return undefined;
  const ctx = taskContext(
    node,
    { runner, signal: new AbortController().signal, reason: 'unhealthy', firstRun: false, forced: false, changedInputs: [], changedUpstream: [], ran: () => false, log: () => {}, stateDir },
    [],
  );
  try {
    return (await hook(ctx)) ?? undefined;
  } catch (error) {
    return `its onFailure failed: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/**
 * Polls one health task: pass within `within`, then keep passing for `stable`. No check runs
 * longer than `within` (until the end of it, while it has yet to pass): one that hangs is
 * stopped and counts as failing, so the gate ends and a rollback follows, as a probe's
 * timeout fails a Kubernetes probe.
 */
async function watch(node: TaskNode, runner: ProcessRunner, signal: AbortSignal, clock: HealthClock): Promise<Health> {
  const spec = node.decl.spec.health!;
  const within = parseDuration(spec.within) ?? 0;
  const stable = parseDuration(spec.stable ?? '0s') ?? 0;
  const interval = Math.min(1000, Math.max(100, Math.floor(Math.min(within || 1000, stable || 1000) / 10)));
  const nowMs = clock.now === undefined ? Date.now : (): number => Number(clock.now!() / 1_000_000n);
  const sleep = clock.sleep ?? ((ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms)));
  const started = nowMs();
  let passedAt: number | undefined;
  let last = '';
  for (;;) {
    if (signal.aborted) return { ok: false, task: node.id, detail: 'interrupted' };
    const left = passedAt === undefined ? started + within - nowMs() : within;
    const verdict = await checkBy(node, runner, signal, left, spec.within);
    const now = nowMs();
    if (verdict?.ok === true) {
      passedAt ??= now;
      if (now - passedAt >= stable) return { ok: true };
    } else {
      last = verdict?.detail ?? '';
      if (passedAt !== undefined) {
        const s = ((now - passedAt) / 1000).toFixed(1);
        return { ok: false, task: node.id, detail: `its check failed ${s} s into the ${spec.stable} it must keep passing${last === '' ? '' : `: ${last}`}` };
      }
      if (now - started >= within) return { ok: false, task: node.id, detail: `its check did not pass within ${spec.within}${last === '' ? '' : `: ${last}`}` };
    }
    await sleep(interval);
  }
}

/**
 * runCheck, stopped (as on Ctrl-C) when it has not given its verdict within `ms` of the wall
 * clock: then failing. A test's clock, which moves as the poll sleeps, does not time a check.
 */
async function checkBy(node: TaskNode, runner: ProcessRunner, signal: AbortSignal, ms: number, within: string): ReturnType<typeof runCheck> {
  const limit = deadline(signal, ms)!;
  try {
    const verdict = await limit.race(runCheck(node, runner, limit.signal));
    return limit.timedOut() && !signal.aborted ? { ok: false, detail: `still running when ${within} were up, and stopped` } : verdict;
  } finally {
    limit.done();
  }
}

async function everyCheck(graph: TaskGraph, runner: ProcessRunner, signal: AbortSignal, jobs: number): Promise<Health> {
  const checked = graph.ordered.filter((n) => n.decl.spec.check !== undefined);
  let failed: Health | undefined;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < checked.length && failed === undefined) {
      const node = checked[next++]!;
      const verdict = await runCheck(node, runner, signal);
      if (verdict !== undefined && !verdict.ok) failed ??= { ok: false, task: node.id, detail: `its check fails${verdict.detail === '' ? '' : `: ${verdict.detail}`}` };
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(jobs, checked.length)) }, worker));
  return failed ?? { ok: true };
}
