// Plain lines for logs and pipes: one line per task that starts and one,
// counted as ninja counts (`[12/40] ✔ id 1.2s`), per task that ends; the
// command and its output in full when it fails, and a line every so often for
// a task that is still running.

import type { EngineEvent } from '../events.ts';
import type { Palette } from './color.ts';
import { writePlan } from './plan-view.ts';
import { Progress, seconds } from './progress.ts';
import { outputTail, Recap } from './recap.ts';
import type { Reporter } from './reporter.ts';

export interface PlainOptions {
  readonly write: (text: string) => void;
  readonly c: Palette;
  /** How often to say a long task is alive (ms). */
  readonly aliveEvery?: number;
  readonly showPlan?: boolean;
}

/** `id failed: exited with code 3`; a canceled task is only `id canceled`, not `id canceled: canceled`. */
export function unsuccessful(id: string, outcome: string, error: string | undefined): string {
  const first = (error ?? '').split('\n', 1)[0]!;
  return first === '' || first === outcome ? `${id} ${outcome}` : `${id} ${outcome}: ${first}`;
}

export function indent(text: string, prefix = '    '): string {
  return text
    .trimEnd()
    .split('\n')
    .map((l) => `${prefix}${l}`)
    .join('\n');
}

/** A failed or canceled task's lines under its `✖` line: its command, then the tail of its output. */
export function failureDetail(event: { readonly command?: string; readonly output?: string; readonly log?: string }): string[] {
  const lines: string[] = [];
  if (event.command !== undefined) lines.push(indent(`$ ${event.command}`));
  if (event.output !== undefined && event.output.trim() !== '') lines.push(indent(outputTail(event.output, event.log).join('\n')));
  return lines;
}

/** `Apply: 2 ran, 1 failed, … in 1.2s.`, then the recap of what failed and what it held back. */
export function summaryText(event: Extract<EngineEvent, { type: 'summary' }>, recap: Recap): string {
  const parts = Object.entries(event.counts).map(([k, v]) => `${v} ${k.replaceAll('-', ' ')}`);
  const head = `${event.command === 'apply' ? 'Apply' : event.command === 'stop' ? 'Stop' : 'Destroy'}: ${parts.join(', ')} in ${seconds(event.durationMs)}.`;
  return [head, ...recap.lines()].map((l) => `${l}\n`).join('');
}

export function plainReporter(options: PlainOptions): Reporter {
  const { write, c } = options;
  const running = new Map<string, number>();
  const progress = new Progress();
  const recap = new Recap();
  const every = options.aliveEvery ?? 15_000;
  const timer = setInterval(() => {
    const now = Date.now();
    for (const [id, since] of running) {
      if (now - since >= every) write(`${c.dim('…')} ${id} still running (${seconds(now - since)})\n`);
    }
  }, every);
  timer.unref();

  const sink = (event: EngineEvent): void => {
    progress.see(event);
    recap.see(event);
    const n = c.dim(progress.counter());
    switch (event.type) {
      case 'plan':
        if (options.showPlan !== false) writePlan(event.plan, c, write);
        break;
      case 'warning':
        write(`${c.yellow('warning')}: ${event.message}\n`);
        break;
      case 'task-start':
        running.set(event.id, Date.now());
        write(`${c.cyan('▶')} ${event.id} ${c.dim(`${event.verb}: ${event.reason}`)}\n`);
        break;
      case 'task-log':
        write(`${c.dim(`  ${event.id}:`)} ${event.message}\n`);
        break;
      case 'task-done':
        running.delete(event.id);
        if (event.outcome === 'ran') {
          write(`${n} ${c.green('✔')} ${event.id} ${c.dim(seconds(event.durationMs))}${event.outputsChanged === false ? c.dim(' (outputs unchanged)') : ''}\n`);
          if (event.output !== undefined && event.output.trim() !== '') write(`${indent(event.output)}\n`);
        } else if (event.outcome === 'failed' || event.outcome === 'canceled') {
          write(`${n} ${c.red('✖')} ${unsuccessful(event.id, event.outcome, event.error)}\n`);
          for (const line of failureDetail(event)) write(`${line}\n`);
        } else if (event.outcome === 'up-to-date') {
          write(`${n} ${c.green('✔')} ${event.id} ${c.dim('up to date (what it consumes came out unchanged)')}\n`);
        } else if (event.outcome === 'skipped') {
          write(`${n} ${c.yellow('-')} ${event.id} skipped (${progress.skipped(event.because)})\n`);
        }
        break;
      case 'destroy-start':
        running.set(event.id, Date.now());
        write(`${c.red('▶')} ${event.id} ${c.dim(event.command ?? 'remove outputs')}\n`);
        break;
      case 'destroy-done':
        running.delete(event.id);
        if (event.outcome === 'destroyed') write(`${n} ${c.green('✔')} ${event.id} done\n`);
        else if (event.outcome === 'failed' || event.outcome === 'canceled') {
          write(`${n} ${c.red('✖')} ${event.outcome === 'canceled' ? unsuccessful(event.id, event.outcome, event.error) : `${event.id} failed: ${event.error ?? ''}`}\n`);
          for (const line of failureDetail({ ...(event.output === undefined ? {} : { output: event.output }), ...(event.log === undefined ? {} : { log: event.log }) })) write(`${line}\n`);
        } else write(`${n} ${c.yellow('-')} ${event.id} kept${event.because === undefined ? '' : ` (${event.because})`}\n`);
        break;
      case 'transaction':
        write(`${c.cyan('↺')} ${event.message}\n`);
        break;
      case 'summary':
        write(summaryText(event, recap));
        break;
    }
  };
  return { sink, close: () => clearInterval(timer) };
}
