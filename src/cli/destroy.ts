import { createInterface } from 'node:readline/promises';
import type { Failure } from '../error.ts';
import type { TaskId } from '../ids.ts';
import { stateDirOf } from '../engine.ts';
import { teardownNodefile } from '../operations.ts';
import type { CliIo } from './output.ts';
import { engineOptions, plainOut, printFailures, reporterFor, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo, mode: 'stop' | 'destroy' = 'destroy'): Promise<number> {
  const options = engineOptions(args, io, mode);
  if ('reason' in options) return printFailures([options], io);
  const fromState = args.values['from-state'] === true;
  if (fromState && args.values['traces'] === true) {
    return printFailures([{ reason: 'usage', command: mode, message: '--traces finds what the Nodefile\'s tasks left in place, so it needs the Nodefile that --from-state leaves out: give one' }], io);
  }
  const reporter = await reporterFor(args, io, stateDirOf(options));
  const ask = mode === 'destroy' && args.values['yes'] !== true;
  const result = await teardownNodefile({
    ...options,
    mode,
    fromState,
    traces: args.values['traces'] === true,
    onEvent: reporter.sink,
    ...(ask ? { confirm: (order: readonly TaskId[]) => confirm(order, io) } : {}),
  });
  await reporter.close();
  if (!result.ok) {
    const code = printFailures(result.error, io);
    // A Nodefile that does not load (mid-edit, or refused by a newer nodegraph) need not stand between the operator and a teardown.
    if (result.error.some((f) => LOADING.has(f.reason))) io.stderr.write(`The state's records alone can be torn down, without the Nodefile: nodegraph ${mode} --from-state\n`);
    return code;
  }
  // Under --json the summary's zero counts say the same.
  if (result.value.order.length === 0) plainOut(io).write(`Nothing to ${mode}: the state records no task.\n`);
  if (io.signal.aborted) return 130;
  return result.value.failed.length > 0 ? 1 : 0;
}

/** The failures of loading and checking the Nodefile, before anything is torn down. */
const LOADING: ReadonlySet<Failure['reason']> = new Set<Failure['reason']>(['nodefile-syntax', 'nodefile-threw', 'nodefile-no-default', 'unawaited-promise', 'invalid-field', 'unknown-task', 'unknown-pool', 'duplicate-task', 'duplicate-output', 'cycle']);

async function confirm(order: readonly TaskId[], io: CliIo): Promise<boolean> {
  if (process.stdin.isTTY !== true) {
    io.stderr.write('destroy needs confirmation: run it on a terminal, or pass --yes\n');
    return false;
  }
  // The question goes to the terminal by stderr, as rm -i asks: stdout may be a log, or the events under --json.
  io.stderr.write(`nodegraph will destroy ${order.length} task${order.length === 1 ? '' : 's'}, in this order:\n`);
  for (const id of order) io.stderr.write(`  - ${id}\n`);
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  // The terminal is raw while readline asks: a Ctrl-C typed is a key, not a signal. Made the signal it
  // stands for, it stops the run as any Ctrl-C does (unhandled, readline throws an AbortError, a crash).
  rl.on('SIGINT', () => process.kill(process.pid, 'SIGINT'));
  try {
    // Ctrl-C, SIGTERM or SIGHUP at the question is a no, not a question still waiting for its answer.
    const answer = await rl.question("Only 'yes' will be accepted: ", { signal: io.signal });
    return answer.trim() === 'yes';
  } catch (error) {
    if (io.signal.aborted) return false;
    throw error;
  } finally {
    rl.close();
  }
}
