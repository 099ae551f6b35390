import { statSync } from 'node:fs';
import path from 'node:path';
import { applyNodefile } from '../apply.ts';
import { stateDirOf } from '../engine.ts';
import type { Failure } from '../error.ts';
import { PLAN_HEAD } from '../plan/saved.ts';
import type { CliIo } from './output.ts';
import { applyMetricsRun, metricsTarget, recordMetrics } from './metrics.ts';
import { beginsWith } from './own-file.ts';
import { atomicFlag, engineOptions, keepFlag, printFailures, reporterFor, str, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  const startedAt = Date.now();
  const options = engineOptions(args, io, 'apply');
  if ('reason' in options) return printFailures([options], io);
  const metrics = metricsTarget(args, io, 'apply', options);
  if (typeof metrics === 'object') return printFailures([metrics], io);
  // `apply PLANFILE`, as Terraform has it: one positional that is a plan file. A
  // task named like a file that exists (nginx.conf, say) is still a task: only a
  // file that begins as `plan --out` writes them is taken for a plan.
  let planFile = str(args.values['plan']);
  let targets = options.targets ?? [];
  if (planFile === undefined && targets.length === 1) {
    const candidate = path.resolve(io.cwd, targets[0]!);
    if (looksLikePlan(candidate)) {
      planFile = candidate;
      targets = [];
    }
  }
  // A lone target that matches no task may have been meant as a plan (notAPlan).
  const planless = planFile === undefined && targets.length === 1;
  const atomic = atomicFlag(args, targets);
  if (typeof atomic === 'string') return printFailures([{ reason: 'usage', command: 'apply', message: atomic }], io);
  const keep = keepFlag(args);
  if (typeof keep === 'string') return printFailures([{ reason: 'usage', command: 'apply', message: keep }], io);
  const reporter = await reporterFor(args, io, stateDirOf(options));
  const result = await applyNodefile({
    ...options,
    ...(atomic === undefined ? {} : { atomic }),
    ...(keep === undefined ? {} : { keep }),
    continue: args.values['continue'] === true,
    targets,
    onEvent: reporter.sink,
    ...(planFile === undefined ? {} : { planFile: path.resolve(io.cwd, planFile), nodefileNamed: args.values['file'] !== undefined }),
  });
  await reporter.close();
  if (metrics !== undefined) recordMetrics(metrics, stateDirOf(options), applyMetricsRun('apply', startedAt, result, io.signal.aborted), io);
  if (!result.ok) return printFailures(planless ? result.error.map((f) => notAPlan(f, targets[0]!, io.cwd)) : result.error, io);
  const s = result.value;
  if (s.canceled.length > 0 || io.signal.aborted) return 130;
  return s.failed.length > 0 ? 1 : 0;
}

/**
 * An unknown target `word` said also as no plan: a file that is not one, or none where
 * a path was plainly meant (`plan.json`, `./p`; ids hold slashes, so not every slash).
 */
function notAPlan(failure: Failure, word: string, cwd: string): Failure {
  if (failure.reason !== 'unknown-target' || failure.target !== word) return failure;
  if (statSync(path.resolve(cwd, word), { throwIfNoEntry: false })?.isFile() === true) return { ...failure, plan: 'not-a-plan' };
  return /\.json$|^\.{0,2}\//.test(word) ? { ...failure, plan: 'missing' } : failure;
}

/** Whether `file` is a file that starts as a saved plan does: `{"format":"nodegraph-plan"`. */
function looksLikePlan(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
  } catch {
    return false;
  }
  return beginsWith(file, PLAN_HEAD);
}
