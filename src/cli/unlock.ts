import { stateDirOf } from '../engine.ts';
import { forceUnlock, liveHolder, lockPath } from '../state/open.ts';
import type { CliIo } from './output.ts';
import { engineOptions, printFailures, type Args } from './shared.ts';

export async function run(args: Args, io: CliIo): Promise<number> {
  if (args.positionals.length > 0) {
    return printFailures([{ reason: 'usage', command: 'unlock', message: `unlock takes no arguments (it removes the state lock), not ${args.positionals.join(' ')}` }], io);
  }
  const options = engineOptions(args, io, 'unlock');
  if ('reason' in options) return printFailures([options], io);
  const stateDir = stateDirOf(options);
  // A run that is alive here still works on the state: removing its lock would let a second one in beside it.
  const live = args.values['force'] === true ? undefined : liveHolder(stateDir);
  if (live !== undefined) {
    return printFailures([{ reason: 'locked', path: lockPath(stateDir), holder: live, running: true }], io);
  }
  const removed = forceUnlock(stateDir);
  if (!removed.ok) return printFailures([removed.error], io);
  const h = removed.value;
  if (args.values['json'] === true) {
    io.stdout.write(`${JSON.stringify({ format: 'nodegraph-unlock', version: 1, removed: h !== undefined, ...(h === undefined ? {} : { holder: h }) })}\n`);
    return 0;
  }
  io.stdout.write(
    h === undefined ? 'The state was not locked.\n' : `Removed the lock held by pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}.\n`,
  );
  return 0;
}
