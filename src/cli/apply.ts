import { statSync } from 'node:fs';
import path from 'node:path';
import { applyNodefile } from '../apply.ts';
import { stateDirOf } from '../engine.ts';
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
  if (!result.ok) return printFailures(result.error, io);
  const s = result.value;
  if (s.canceled.length > 0 || io.signal.aborted) return 130;
  return s.failed.length > 0 ? 1 : 0;
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
