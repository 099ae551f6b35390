// The terminal view, drawn as ninja draws its status: each task that settles
// gets a line that scrolls up and is never rewritten (so it keeps its outcome
// to the end), and below them a live area redrawn in place: the running
// tasks with their elapsed time and last line of output, a few queued ones,
// and a status line `[done/total] N running · elapsed`. A failure's command
// and output follow its line at once.
//
// A row's life:
//
//   queued ──task-start──▶ running ──task-done──▶ printed (ran | failed | canceled)
//      └──task-done (skipped, up to date)──────▶ printed

import type { EngineEvent } from '../events.ts';
import type { TaskId } from '../ids.ts';
import type { Palette } from './color.ts';
import { failureDetail, plainReporter, summaryText, unsuccessful } from './plain.ts';
import { writePlan } from './plan-view.ts';
import { Progress, seconds } from './progress.ts';
import { Recap } from './recap.ts';
import type { Reporter } from './reporter.ts';

/** Beyond this many acting tasks, plain lines: the view keeps a row for each. */
const MAX_VIEW_TASKS = 300;
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const CLEAR_LINE = '\x1b[K';
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';

export interface TtyOptions {
  readonly write: (text: string) => void;
  readonly c: Palette;
  /** The terminal's size, asked at each frame (a resized window). */
  readonly columns: () => number;
  readonly rows: () => number;
  /** How often the live area is redrawn (ms). */
  readonly frameMs?: number;
  /** Aborted by Ctrl-C: the live area is cleared at once, so what the CLI says next is not drawn over. */
  readonly signal?: AbortSignal;
}

interface Row {
  readonly id: TaskId;
  readonly verb: string;
  state: 'queued' | 'running';
  startedAt: number;
  last: string;
}

/** `text` cut to `width` characters, with an ellipsis where it was cut. */
function fit(text: string, width: number): string {
  const chars = [...text];
  return chars.length <= width ? text : `${chars.slice(0, Math.max(0, width - 1)).join('')}…`;
}

/** How many rows of a `columns`-wide terminal `text` (whole lines, colors and all) takes up. */
export function screenRows(text: string, columns: number): number {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.reduce((n, l) => n + Math.max(1, Math.ceil([...l.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')].length / Math.max(1, columns))), 0);
}

/** What the live area shows, frame by frame. */
interface LiveState {
  readonly rows: ReadonlyMap<TaskId, Row>;
  readonly progress: Progress;
  readonly failures: number;
  readonly tick: number;
}

/**
 * The live area: the running rows with a spinner, their elapsed time and last line, a few queued ones, and the
 * status line; at most the terminal's rows less two, so the area never scrolls the screen (the rest are counted).
 */
function liveLines({ rows, progress, failures, tick }: LiveState, options: TtyOptions): string[] {
  const { c } = options;
  const width = Math.max(20, options.columns() - 1);
  const room = Math.max(2, options.rows() - 2);
  const now = Date.now();
  const running = [...rows.values()].filter((r) => r.state === 'running');
  const queued = [...rows.values()].filter((r) => r.state === 'queued');
  const lines: string[] = [];
  const runShown = running.length <= room ? running.length : room - 1;
  for (const r of running.slice(0, runShown)) {
    const head = fit(`${r.id} ${r.verb} ${seconds(now - r.startedAt)}`, width - 2);
    const tail = r.last === '' ? '' : fit(`  ${r.last}`, width - 2 - [...head].length);
    lines.push(`${c.cyan(SPINNER[tick % SPINNER.length]!)} ${head}${c.dim(tail)}`);
  }
  if (runShown < running.length) lines.push(`${c.cyan('…')} and ${running.length - runShown} more running`);
  const left = room - lines.length;
  const shown = queued.length <= left ? queued.length : Math.max(0, left - 1);
  for (const r of queued.slice(0, shown)) lines.push(c.dim(`· ${fit(`${r.id} ${r.verb} queued`, width - 2)}`));
  if (shown < queued.length && left > 0) lines.push(c.dim(`· … and ${queued.length - shown} more queued`));
  const failed = failures > 0 ? ` · ${failures} failed` : '';
  const status = `${progress.counter()} ${running.length} running · ${queued.length} queued${failed} · ${seconds(now - progress.startedAt)}`;
  lines.push(c.bold(fit(status, width)));
  return lines;
}

/** The line that stays for a settled task or destroy, with a failure's command and output below it. */
function settledLine(event: Extract<EngineEvent, { type: 'task-done' | 'destroy-done' }>, c: Palette, progress: Progress): string {
  if (event.type === 'task-done') {
    switch (event.outcome) {
      case 'ran':
        return `${c.green('✔')} ${event.id} ${c.dim(`${seconds(event.durationMs)}${event.outputsChanged === false ? ', outputs unchanged' : ''}`)}`;
      case 'up-to-date':
        return `${c.green('✔')} ${event.id} ${c.dim('up to date (what it consumes came out unchanged)')}`;
      case 'skipped':
        return `${c.yellow('-')} ${event.id} skipped (${progress.skipped(event.because)})`;
      case 'failed':
      case 'canceled':
        return [`${c.red('✖')} ${unsuccessful(event.id, event.outcome, event.error)}`, ...failureDetail(event)].join('\n');
    }
  }
  if (event.outcome === 'destroyed') return `${c.green('✔')} ${event.id} destroyed`;
  if (event.outcome === 'failed' || event.outcome === 'canceled') {
    const detail = failureDetail({ ...(event.output === undefined ? {} : { output: event.output }), ...(event.log === undefined ? {} : { log: event.log }) });
    const said = event.outcome === 'canceled' ? unsuccessful(event.id, event.outcome, event.error) : `${event.id} failed: ${event.error ?? ''}`;
    return [`${c.red('✖')} ${said}`, ...detail].join('\n');
  }
  return `${c.yellow('-')} ${event.id} ${event.outcome}${event.because === undefined ? '' : ` (${event.because})`}`;
}

/**
 * The text that replaces a live area of `drawn` rows with `above` (lines that stay) and then `lines`.
 * Each row is rewritten and cleared to its end, rows left over are cleared one by one, and the cursor never
 * goes below the area: never "clear to the end of the screen", which a terminal may take for a clear of the
 * whole screen when the area starts at its top (tmux's scroll-on-clear then pushes it into the scrollback).
 */
function redraw(drawn: number, above: string, lines: readonly string[], columns: number): string {
  let out = drawn > 0 ? `\r\x1b[${drawn}A` : '';
  let written = 0;
  if (above !== '') {
    out += above.replaceAll('\n', `${CLEAR_LINE}\n`);
    written += screenRows(above, columns);
  }
  out += lines.map((l) => `${l}${CLEAR_LINE}\n`).join('');
  written += lines.length;
  // The old area's rows below the new one: cleared, then back up to the end of what was written.
  const stale = drawn - written;
  if (stale > 0) out += `${`${CLEAR_LINE}\x1b[B`.repeat(stale)}\x1b[${stale}A`;
  return out;
}

export function ttyReporter(options: TtyOptions): Reporter {
  const { write, c } = options;
  const fallback = plainReporter({ write, c, showPlan: false });
  const rows = new Map<TaskId, Row>();
  let progress = new Progress();
  const recap = new Recap();
  let drawn = 0;
  let plain = false;
  let summary: EngineEvent | undefined;
  let tick = 0;
  let failures = 0;

  /** Rewrites the live area in place, with `above` (lines that stay) first, and the area again unless closing. */
  const frame = (above: string, live: boolean): void => {
    const lines = live ? liveLines({ rows, progress, failures, tick }, options) : [];
    write(redraw(drawn, above, lines, options.columns()));
    drawn = lines.length;
  };

  const timer = setInterval(() => {
    tick++;
    if (!plain && rows.size > 0) frame('', true);
  }, options.frameMs ?? 100);
  timer.unref();
  options.signal?.addEventListener('abort', () => frame('', false), { once: true });

  const settled = (id: TaskId, line: string): void => {
    rows.delete(id);
    frame(`${c.dim(progress.counter())} ${line}\n`, rows.size > 0);
  };

  const sink = (event: EngineEvent): void => {
    if (plain) {
      fallback.sink(event);
      return;
    }
    progress.see(event);
    recap.see(event);
    switch (event.type) {
      case 'plan': {
        progress = new Progress();
        progress.see(event);
        failures = 0;
        rows.clear();
        frame('', false);
        writePlan(event.plan, c, write, { width: options.columns() });
        if (progress.total - event.plan.counts.destroy - event.plan.counts.stop > MAX_VIEW_TASKS) {
          plain = true;
          fallback.sink(event);
          return;
        }
        for (const e of event.plan) {
          if (e.action !== 'unchanged' && e.action !== 'destroy') rows.set(e.id, { id: e.id, verb: e.verb, state: 'queued', startedAt: 0, last: '' });
        }
        write(HIDE_CURSOR);
        if (rows.size > 0) frame('', true);
        break;
      }
      case 'task-start':
      case 'destroy-start': {
        const row = rows.get(event.id) ?? { id: event.id, verb: event.type === 'destroy-start' ? 'destroy' : event.verb, state: 'queued', startedAt: 0, last: '' };
        row.state = 'running';
        row.startedAt = Date.now();
        rows.set(event.id, row);
        frame('', true);
        break;
      }
      case 'task-log': {
        const row = rows.get(event.id);
        if (row !== undefined) row.last = event.message.trimEnd().split('\n').pop() ?? '';
        break;
      }
      case 'task-progress': {
        const row = rows.get(event.id);
        if (row !== undefined) row.last = event.line;
        break;
      }
      case 'task-done':
      case 'destroy-done':
        if (event.type === 'task-done' && (event.outcome === 'failed' || event.outcome === 'canceled')) failures++;
        settled(event.id, settledLine(event, c, progress));
        break;
      case 'warning':
        frame(`${c.yellow('warning')}: ${event.message}\n`, rows.size > 0);
        break;
      case 'transaction':
        frame(`${c.cyan('↺')} ${event.message}\n`, rows.size > 0);
        break;
      case 'summary':
        // Printed under the finished view.
        summary = event;
        break;
    }
  };

  return {
    sink,
    close: () => {
      clearInterval(timer);
      // Rows the engine never reached (an abort before they were settled) say so, once.
      const left = [...rows.values()].map((r) => `${c.yellow('-')} ${r.id} not run\n`).join('');
      rows.clear();
      frame(left, false);
      write(SHOW_CURSOR);
      if (summary?.type === 'summary') write(summaryText(summary, recap));
      fallback.close();
    },
  };
}
