// What an operator reads first when a run goes wrong: a failed task's command, its
// exit code and the last lines of its output, with the whole output kept in a log
// under the state folder; and, at the end, a recap of every failed task and what
// became of the tasks that waited on it (as terraform repeats its errors at the bottom).

import { createHash } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { EngineEvent, EventSink } from '../events.ts';

/** How many of a failed task's last lines the terminal shows; the log has them all. */
export const TAIL_LINES = 20;
/** A log keeps at most the last this many bytes of a run's output. */
export const LOG_MAX_BYTES = 1 << 20;

/** `<state>/logs/tasks/`: one log per task, its newest run (the node's diagnostics have `<state>/logs/<slot>-<time>/`). */
export function taskLogDir(stateDir: string): string {
  return path.join(stateDir, 'logs', 'tasks');
}

/**
 * A task id as a file name: what is not a letter, digit, `_` or `-` (a `/`, a
 * dot) as `%XX`, so no two ids share one. One too long for a file name (255
 * bytes, with `destroy-` and `.tmp` around it) is cut, and the SHA-256 of the
 * whole id follows a `~`, which no escaped id holds.
 */
export function taskLogName(id: string): string {
  const escaped = [...Buffer.from(id)].map((b) => (/[A-Za-z0-9_-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
  return escaped.length <= LOG_NAME_MAX ? `${escaped}.log` : `${escaped.slice(0, LOG_NAME_MAX - 65)}~${createHash('sha256').update(id).digest('hex')}.log`;
}

/** The longest escaped id kept whole in a log's name. */
const LOG_NAME_MAX = 200;

/** The whole output, or its last LOG_MAX_BYTES from a line's start, after a line that says how much was cut. */
function bounded(output: string): string {
  const bytes = Buffer.from(output);
  if (bytes.length <= LOG_MAX_BYTES) return output;
  let start = bytes.length - LOG_MAX_BYTES;
  const newline = bytes.indexOf(10, start);
  if (newline >= 0 && newline < bytes.length - 1) start = newline + 1;
  return `[… ${start} earlier bytes not kept]\n${bytes.subarray(start).toString()}`;
}

/**
 * Keeps the output of each task that ran a command in `<state>/logs/tasks/<id>.log` (a teardown's in
 * `stop-<id>.log` or `destroy-<id>.log`; its newest run that printed anything, written whole then renamed into
 * place; a run that printed nothing costs no file operation) and passes
 * its events on with `log`, the file's path. A log that cannot be written is left out with a warning: the run goes on.
 */
export function keepTaskLogs(stateDir: string, sink: EventSink): EventSink {
  const dir = taskLogDir(stateDir);
  let made = false;
  return (event) => {
    if ((event.type === 'task-done' || event.type === 'destroy-done') && event.output !== undefined && event.output !== '') {
      const file = path.join(dir, event.type === 'destroy-done' ? `${event.action ?? 'destroy'}-${taskLogName(event.id)}` : taskLogName(event.id));
      try {
        if (!made) mkdirSync(dir, { recursive: true, mode: 0o700 });
        made = true;
        writeFileSync(`${file}.tmp`, bounded(event.output), { mode: 0o600 });
        renameSync(`${file}.tmp`, file);
        sink({ ...event, log: file });
        return;
      } catch (error) {
        sink({ type: 'warning', message: `could not keep ${event.id}'s output in ${file}: ${(error as Error).message}` });
      }
    }
    sink(event);
  };
}

/** `path` as the operator gives it: relative to the working folder when it lies under it. */
export function shownPath(file: string, cwd = process.cwd()): string {
  const relative = path.relative(cwd, file);
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

/**
 * A line as a terminal leaves it: what follows its last carriage return (a progress bar's last state; a CRLF line
 * whole), tabs as spaces to the next stop of 8, so that a view can count the columns it takes.
 */
export function asShown(line: string): string {
  const trimmed = line.endsWith('\r') ? line.replace(/\r+$/, '') : line;
  const last = trimmed.slice(trimmed.lastIndexOf('\r') + 1);
  if (!last.includes('\t')) return last;
  let out = '';
  for (const ch of last) out += ch === '\t' ? ' '.repeat(8 - ([...out].length % 8)) : ch;
  return out;
}

/**
 * A failed command's output as the terminal shows it: the last TAIL_LINES lines, after a line that says how many
 * came before and where they all are; a short output whole.
 */
export function outputTail(output: string, log: string | undefined): string[] {
  const lines = output.trimEnd().split('\n').map(asShown);
  if (lines.length <= TAIL_LINES) return lines;
  const earlier = lines.length - TAIL_LINES;
  const where = log === undefined ? '' : ` in ${shownPath(log)}`;
  return [`… ${earlier} earlier line${earlier === 1 ? '' : 's'}${where}`, ...lines.slice(-TAIL_LINES)];
}

export interface FailedTask {
  readonly id: string;
  readonly outcome: 'failed' | 'canceled';
  /** `exit 2`, `killed by SIGTERM`, or the first line of why it failed. */
  readonly what: string;
  readonly exitCode?: number;
  readonly log?: string;
  /** The tasks skipped because this one did not succeed. */
  readonly skipped: string[];
}

/** The facts of a run's recap, gathered from its events: each task that failed, and what did not run because of it. */
export class Recap {
  readonly failed: FailedTask[] = [];
  /** Skipped with no upstream to blame: the run stopped (a failure without -k, an interrupt). */
  readonly stopped: string[] = [];

  see(event: EngineEvent): void {
    if (event.type === 'plan') {
      this.failed.length = 0;
      this.stopped.length = 0;
    } else if (event.type === 'task-done') {
      if (event.outcome === 'failed' || event.outcome === 'canceled') {
        const first = (event.error ?? '').split('\n', 1)[0]!;
        const what = event.exitCode !== undefined ? `exit ${event.exitCode}` : first === '' ? event.outcome : first;
        this.failed.push({ id: event.id, outcome: event.outcome, what, ...(event.exitCode === undefined ? {} : { exitCode: event.exitCode }), ...(event.log === undefined ? {} : { log: event.log }), skipped: [] });
      } else if (event.outcome === 'skipped') {
        // `because` names the upstream that did not succeed: the failed one itself, or one skipped because of it.
        const blamed = event.because === undefined ? undefined : this.#root(event.because);
        if (blamed === undefined) this.stopped.push(event.id);
        else blamed.skipped.push(event.id);
      }
    } else if (event.type === 'destroy-done' && (event.outcome === 'failed' || event.outcome === 'canceled')) {
      const what = event.exitCode !== undefined ? `exit ${event.exitCode}` : (event.error ?? event.outcome).split('\n', 1)[0]!;
      this.failed.push({ id: event.id, outcome: event.outcome, what, ...(event.exitCode === undefined ? {} : { exitCode: event.exitCode }), ...(event.log === undefined ? {} : { log: event.log }), skipped: [] });
    }
  }

  /** The failed task a skipped `id` waited on, through the tasks skipped in between. */
  #root(id: string): FailedTask | undefined {
    return this.failed.find((f) => f.id === id || f.skipped.includes(id));
  }

  /** `Failed: a/b (exit 2), 3 skipped because of it; output in <log>`, one line per failed task, then the run's stop. */
  lines(): string[] {
    const out = this.failed.map((f) => {
      const skipped = f.skipped.length === 0 ? '' : `, ${f.skipped.length} skipped because of it`;
      const log = f.log === undefined ? '' : `; output in ${shownPath(f.log)}`;
      const what = f.what === f.outcome ? '' : ` (${f.what})`;
      return `${f.outcome === 'failed' ? 'Failed' : 'Canceled'}: ${f.id}${what}${skipped}${log}`;
    });
    if (this.stopped.length > 0) out.push(`Not started: ${this.stopped.length} skipped because the run stopped${this.failed.length > 0 ? ` after ${this.failed[0]!.id} ${this.failed[0]!.outcome}` : ''}`);
    return out;
  }
}

/** The recap as JSON (the summary's `failures` and `stopped`): the same facts, paths whole. */
export function recapJson(recap: Recap): { failures: FailedTask[]; stopped: string[] } | undefined {
  if (recap.failed.length === 0 && recap.stopped.length === 0) return undefined;
  return { failures: recap.failed.map((f) => ({ ...f, skipped: [...f.skipped] })), stopped: [...recap.stopped] };
}
