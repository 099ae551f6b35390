import { loadGraph, stateDirOf } from '../engine.ts';
import type { Failure } from '../error.ts';
import type { TaskGraph } from '../graph/graph.ts';
import type { Result } from '../util/result.ts';
import { nodefileMissing, nodefileModules, nodefileReads } from '../nodefile/load.ts';
import { applyNodefile } from '../apply.ts';
import { runningHolder } from '../state/lock.ts';
import { watchLoop } from '../watch/watcher.ts';
import type { CliIo } from './output.ts';
import { engineOptions, paletteFor, plainOut, printFailures, reporterFor, str, type Args } from './shared.ts';

const MAX_TIMER_MS = 2 ** 31 - 1;
const LOCK_POLL_MS = 100;

/**
 * Waits while a running holder keeps the state lock: true once it lets go, false when
 * there is none to wait for (gone, or an unreadable lock) or on Ctrl-C.
 */
async function lockReleased(stateDir: string, signal: AbortSignal, say: (text: string) => void): Promise<boolean> {
  const holder = runningHolder(stateDir);
  if (holder === undefined) return false;
  say(`waiting for pid ${holder.pid} on ${holder.host} (${holder.command}) to release the state lock\n`);
  while (!signal.aborted && runningHolder(stateDir) !== undefined) await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  return !signal.aborted;
}

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'watch');
  if ('reason' in options) return printFailures([options], io);
  const debounceText = str(args.values['debounce']) ?? '200';
  const debounceMs = Number(debounceText);
  // Digits only (Number('') is 0), and no more than a timer holds: Node fires a longer one after 1 ms.
  if (!/^\d+$/.test(debounceText) || debounceMs > MAX_TIMER_MS) {
    return printFailures([{ reason: 'usage', command: 'watch', message: `--debounce takes a whole number of milliseconds up to ${MAX_TIMER_MS}, not ${JSON.stringify(debounceText)}` }], io);
  }
  // A Nodefile that is not there (a typo, a folder) is apply's error, exit 1: waiting for it to appear would hide the typo.
  const missing = nodefileMissing(options.nodefile);
  if (missing !== undefined) return printFailures([missing], io);
  const say = plainOut(io);
  const c = paletteFor(io, say);
  await watchLoop({
    debounceMs,
    signal: io.signal,
    fallbackPaths: [options.nodefile],
    modules: nodefileModules,
    reads: nodefileReads,
    stateDir: stateDirOf(options),
    onState: (state, why) => {
      if (state === 'debouncing' && why !== undefined) say.write(c.dim(`change: ${why}\n`));
      if (state === 'idle') say.write(c.dim('watching for changes (Ctrl-C to stop)\n'));
    },
    runOnce: async () => {
      // What the run's last load of the Nodefile gave: after a failure, its graph is what to watch.
      const last: { loaded?: Result<TaskGraph, Failure[]> } = {};
      for (;;) {
        // Plain lines even on a terminal: runs follow one another in one scrolling log.
        const reporter = await reporterFor(args, io, stateDirOf(options), { live: false });
        const result = await applyNodefile({ ...options, onEvent: reporter.sink, onLoad: (loaded) => (last.loaded = loaded) });
        await reporter.close();
        if (result.ok) return result.value.graph;
        printFailures(result.error, io);
        // A change seen while another run holds the state is applied once that run ends, not dropped.
        if (!result.error.some((f) => f.reason === 'locked') || !(await lockReleased(stateDirOf(options), io.signal, (text) => say.write(c.dim(text))))) break;
      }
      // Failed before loading (the state, the lock): watch what a load now finds; a Nodefile that did not load, alone.
      const loaded = last.loaded ?? (await loadGraph(options.nodefile, stateDirOf(options)));
      return loaded.ok ? loaded.value : undefined;
    },
  });
  return io.signal.aborted ? 130 : 0;
}
