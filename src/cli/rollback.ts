import { rollbackNodefile } from '../apply.ts';
import type { CliIo } from './output.ts';
import { stateDirOf } from '../engine.ts';
import { applyMetricsRun, metricsTarget, recordMetrics } from './metrics.ts';
import { engineOptions, keepFlag, plainOut, positiveWhole, printFailures, reporterFor, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  const startedAt = Date.now();
  const options = engineOptions(args, io, 'rollback');
  if ('reason' in options) return printFailures([options], io);
  const metrics = metricsTarget(args, io, 'rollback', options);
  if (typeof metrics === 'object') return printFailures([metrics], io);
  const [word, ...extra] = args.positionals;
  if (extra.length > 0) return printFailures([{ reason: 'usage', command: 'rollback', message: 'rollback takes at most one generation number' }], io);
  const number = word === undefined ? undefined : positiveWhole(word);
  if (word !== undefined && number === undefined) {
    return printFailures([{ reason: 'usage', command: 'rollback', message: `a generation is a whole number, as nodegraph generations lists them, not ${JSON.stringify(word)}` }], io);
  }
  const keep = keepFlag(args);
  if (typeof keep === 'string') return printFailures([{ reason: 'usage', command: 'rollback', message: keep }], io);
  const reporter = await reporterFor(args, io, stateDirOf(options));
  const result = await rollbackNodefile({
    ...options,
    targets: [],
    ...(number === undefined ? {} : { generation: number }),
    ...(keep === undefined ? {} : { keep }),
    atomic: args.values['no-atomic'] !== true,
    onEvent: reporter.sink,
  });
  await reporter.close();
  if (metrics !== undefined) recordMetrics(metrics, stateDirOf(options), applyMetricsRun('rollback', startedAt, result, io.signal.aborted), io);
  if (!result.ok) return printFailures(result.error, io);
  if (io.signal.aborted) return 130;
  if (result.value.failed.length > 0) return 1;
  plainOut(io).write(`Generation ${result.value.generation} is current.\n`);
  return 0;
}
