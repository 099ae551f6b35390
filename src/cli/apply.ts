import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { applyNodefile } from '../operations.ts';
import type { CliIo } from './main.ts';
import { engineOptions, printFailures, reporterFor, str, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'apply');
  if ('reason' in options) return printFailures([options], io);
  // `apply PLANFILE`, as Terraform has it: one positional that is a file, not a task.
  let planFile = str(args.values['plan']);
  let targets = options.targets ?? [];
  if (planFile === undefined && targets.length === 1) {
    const candidate = path.resolve(io.cwd, targets[0]!);
    if (existsSync(candidate) && statSync(candidate).isFile()) {
      planFile = candidate;
      targets = [];
    }
  }
  const reporter = await reporterFor(args, io);
  const result = await applyNodefile({
    ...options,
    targets,
    onEvent: reporter.sink,
    ...(planFile === undefined ? {} : { planFile: path.resolve(io.cwd, planFile) }),
  });
  await reporter.close();
  if (!result.ok) return printFailures(result.error, io);
  const s = result.value;
  if (s.canceled.length > 0 || io.signal.aborted) return 130;
  return s.failed.length > 0 ? 1 : 0;
}
