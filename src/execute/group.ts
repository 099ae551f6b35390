// Signals a command and everything it started. Each command runs in a session
// and process group of its own (spawn's `detached`), the way make's and ninja's
// users expect Ctrl-C to reach a whole recipe: killing only the command left
// `sh -c 'sleep 20; ...'`'s sleep running, holding the output pipe, and a
// canceled run waited for it. (A terminal's Ctrl-C no longer reaches the
// commands by itself: the engine's handler cancels them, with SIGTERM and,
// 5 s later, SIGKILL.) Used by runner.ts for spawnCommand and the execa path;
// spawnd signals the group itself (native/spawnd.c).

/** A started process: Node's ChildProcess, or execa's subprocess. */
interface Started {
  readonly pid?: number | undefined;
  kill(signal: NodeJS.Signals): boolean;
}

export function signalGroup(child: Started, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) {
      process.kill(-child.pid, signal);
      return;
    }
  } catch {
    // the group is gone (or was never made): the command itself, if it is still there
  }
  child.kill(signal);
}

/**
 * Cancels a started command when `signal` aborts: SIGTERM to its group, and
 * SIGKILL `killAfterMs` later if it is still there. `settled()` once the
 * command has ended; `canceled()` says whether the abort came first.
 */
export function cancelOnAbort(child: Started, signal: AbortSignal | undefined, killAfterMs: number): { canceled(): boolean; settled(): void } {
  let canceled = false;
  let killer: NodeJS.Timeout | undefined;
  const onAbort = (): void => {
    canceled = true;
    signalGroup(child, 'SIGTERM');
    killer = setTimeout(() => signalGroup(child, 'SIGKILL'), killAfterMs);
    killer.unref();
  };
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    canceled: () => canceled,
    settled: () => {
      clearTimeout(killer);
      signal?.removeEventListener('abort', onAbort);
    },
  };
}
