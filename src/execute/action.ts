// Runs one task's action — a command through the process runner, or a
// function with a TaskContext — and reports how it went as a value.

import type { TaskNode } from '../graph/graph.ts';
import { canonicalJson } from '../hash/value.ts';
import { taskContext, type ContextOptions } from '../observe/context.ts';
import type { Json, TaskFunction } from '../nodefile/types.ts';
import type { EventSink } from '../events.ts';
import { describeCommand, heldOutput } from '../process-runner.ts';
import { deadline, type Deadline } from '../util/deadline.ts';

export interface ActionContext extends Omit<ContextOptions, 'log'> {
  readonly verb: string;
  readonly emit: EventSink;
}

export type ActionResult =
  | { readonly ok: true; readonly value: Json | undefined; readonly command: string | undefined; readonly output: string }
  | {
      readonly ok: false;
      readonly canceled: boolean;
      readonly error: string;
      readonly command: string | undefined;
      readonly output: string;
      /** The command's exit code, when a command ran and exited (not for a function, nor a signal or spawn failure). */
      readonly exitCode?: number;
    };

/** What a task whose `timeout` was up failed with. */
const timedOut = (timeout: string | undefined): string => `timed out after ${timeout}, and was stopped`;

export async function runAction(node: TaskNode, context: ActionContext): Promise<ActionResult> {
  // Its timeout: stopped as on Ctrl-C (a command's process group), but failed, not canceled.
  const limit = deadline(context.signal, node.decl.spec.timeout);
  try {
    return await act(node, context, limit);
  } finally {
    limit?.done();
  }
}

async function act(node: TaskNode, context: ActionContext, limit: Deadline | undefined): Promise<ActionResult> {
  const { spec } = node.decl;
  const run = spec.run;
  const signal = limit?.signal ?? context.signal;
  const late = (): boolean => limit?.timedOut() === true && !context.signal.aborted;
  if (typeof run !== 'function') {
    const command = describeCommand(run);
    context.emit({ type: 'task-start', id: node.id, verb: context.verb, reason: context.reason, command });
    const progress = lastLines(node.id, context.emit);
    const options = { cwd: node.cwd, env: spec.env, signal, onOutput: progress.add };
    const result = await (context.runner.runTask === undefined ? context.runner.run(run, options) : context.runner.runTask(run, options)).finally(progress.stop);
    if (result.held === true) context.emit({ type: 'warning', message: heldOutput(node.id, 'its command') });
    if (late()) return { ok: false, canceled: false, error: timedOut(spec.timeout), command, output: result.output };
    if (result.ok) return { ok: true, value: undefined, command, output: result.output };
    const exited = result.exitCode === null || result.exitCode === undefined ? {} : { exitCode: result.exitCode };
    return { ok: false, canceled: result.canceled || context.signal.aborted, error: result.failure ?? 'failed', command, output: result.output, ...exited };
  }
  context.emit({ type: 'task-start', id: node.id, verb: context.verb, reason: context.reason, command: undefined });
  const log: string[] = [];
  // What the commands it runs print is its last line too, as a command's is.
  const progress = lastLines(node.id, context.emit);
  const ctx = taskContext(
    node,
    { ...context, signal, log: (message) => context.emit({ type: 'task-log', id: node.id, message }), warn: (message) => context.emit({ type: 'warning', message }), onOutput: progress.add },
    log,
  );
  try {
    // A function that does not heed its signal is not waited for past its timeout.
    const running = (run as TaskFunction)(ctx);
    const value = limit === undefined ? await running : await limit.race(running);
    if (context.signal.aborted) return { ok: false, canceled: true, error: 'canceled', command: undefined, output: log.join('') };
    if (late()) return { ok: false, canceled: false, error: timedOut(spec.timeout), command: undefined, output: log.join('') };
    if (value !== undefined) {
      // The value becomes part of the output hash: NaN, a bigint, a function or a cycle cannot.
      try {
        canonicalJson(value);
      } catch (error) {
        const why = (error as Error).message.replace(/^canonicalJson: /, '');
        return { ok: false, canceled: false, error: `returned a value that is not JSON (${why})`, command: undefined, output: log.join('') };
      }
    }
    return { ok: true, value: value === undefined ? undefined : value, command: undefined, output: log.join('') };
  } catch (error) {
    return {
      ok: false,
      canceled: context.signal.aborted,
      error: late() ? timedOut(spec.timeout) : error instanceof Error ? error.message : String(error),
      command: undefined,
      output: log.join(''),
    };
  } finally {
    progress.stop();
  }
}

/** At most how often a running command's last line is said (ms): about as often as the live view redraws. */
const PROGRESS_EVERY = 100;

/** The last line of `text` that says something: colour codes dropped, and of a line a progress bar redraws with \r, what it shows last. */
export function lastLine(text: string): string {
  const lines = text.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const shown = lines[i]!.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').split('\r').filter((part) => part.trim() !== '').at(-1)?.trim() ?? '';
    if (shown !== '') return shown;
  }
  return '';
}

/** Keeps the tail of a command's output and says its last line as a task-progress event, at most every PROGRESS_EVERY ms (and once more after a pause). */
function lastLines(id: TaskNode['id'], emit: EventSink): { add: (text: string) => void; stop: () => void } {
  let tail = '';
  let said = '';
  let at = 0;
  let timer: NodeJS.Timeout | undefined;
  const say = (): void => {
    timer = undefined;
    at = Date.now();
    const line = lastLine(tail);
    if (line === '' || line === said) return;
    said = line;
    emit({ type: 'task-progress', id, line });
  };
  return {
    add: (text) => {
      tail = (tail + text).slice(-2048);
      if (timer !== undefined) return;
      const wait = PROGRESS_EVERY - (Date.now() - at);
      if (wait <= 0) say();
      else timer = setTimeout(say, wait).unref();
    },
    stop: () => clearTimeout(timer),
  };
}
