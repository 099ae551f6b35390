import { stateDirOf } from '../engine.ts';
import { forceUnlock } from '../state/open.ts';
import type { CliIo } from './main.ts';
import { engineOptions, printFailures, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'unlock');
  if ('reason' in options) return printFailures([options], io);
  const removed = forceUnlock(stateDirOf(options));
  if (!removed.ok) return printFailures([removed.error], io);
  const h = removed.value;
  io.stdout.write(
    h === undefined ? 'The state was not locked.\n' : `Removed the lock held by pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}.\n`,
  );
  return 0;
}
