// The terminal view: the one module that imports listr2. Each task the plan
// says will (or may) act gets a line that spins while it runs and ends
// ticked, crossed or skipped; a failure's command and output are printed in
// full once the view is done. Large plans fall back to plain lines.

import { Listr, type DefaultRenderer, type ListrTaskWrapper } from 'listr2';
import type { EngineEvent } from '../events.ts';
import type { TaskId } from '../ids.ts';
import type { PlanEntry } from '../plan/plan.ts';
import type { Palette } from './color.ts';
import { indent, plainReporter, unsuccessful } from './plain.ts';
import { writePlan } from './plan-view.ts';
import type { Reporter } from './reporter.ts';

/** Beyond this many acting tasks the view would only scroll: plain lines serve better. */
const MAX_VIEW_TASKS = 300;

interface Row {
  resolve: (outcome: { ok: boolean; skip?: string; title?: string; error?: string }) => void;
  wrapper?: ListrTaskWrapper<unknown, typeof DefaultRenderer, never>;
}

export function ttyReporter(write: (text: string) => void, c: Palette): Reporter {
  const fallback = plainReporter({ write, c, showPlan: false });
  const rows = new Map<TaskId, Row>();
  const pending = new Map<TaskId, { ok: boolean; skip?: string; title?: string; error?: string }>();
  const failures: string[] = [];
  let view: Promise<unknown> | undefined;
  let plain = false;
  let summary: EngineEvent | undefined;

  const settle = (id: TaskId, outcome: { ok: boolean; skip?: string; title?: string; error?: string }): void => {
    const row = rows.get(id);
    if (row === undefined) pending.set(id, outcome);
    else row.resolve(outcome);
  };

  const start = (ids: readonly { id: TaskId; title: string }[]): void => {
    const list = new Listr(
      ids.map(({ id, title }) => ({
        title,
        task: (_ctx: unknown, wrapper: ListrTaskWrapper<unknown, typeof DefaultRenderer, never>) =>
          new Promise<void>((resolve, reject) => {
            const done = (o: { ok: boolean; skip?: string; title?: string; error?: string }): void => {
              if (o.title !== undefined) wrapper.title = o.title;
              if (o.skip !== undefined) {
                wrapper.skip(o.skip);
                resolve();
              } else if (o.ok) resolve();
              else reject(new Error(o.error ?? 'failed'));
            };
            rows.set(id, { resolve: done, wrapper });
            const early = pending.get(id);
            if (early !== undefined) done(early);
          }),
      })),
      {
        concurrent: true,
        exitOnError: false,
        renderer: 'default',
        registerSignalListeners: false,
        rendererOptions: { collapseErrors: false, showErrorMessage: true, collapseSkips: false },
      },
    );
    view = list.run().catch(() => undefined);
  };

  const sink = (event: EngineEvent): void => {
    if (plain) {
      fallback.sink(event);
      return;
    }
    switch (event.type) {
      case 'plan': {
        writePlan(event.plan, c, write);
        const { counts } = event.plan;
        if (event.plan.size - counts.unchanged - counts.destroy > MAX_VIEW_TASKS) {
          plain = true;
          return;
        }
        const acting: PlanEntry[] = [];
        for (const e of event.plan) if (e.action !== 'unchanged' && e.action !== 'destroy') acting.push(e);
        if (acting.length > 0) start(acting.map((e) => ({ id: e.id, title: `${e.id} ${c.dim(e.verb)}` })));
        break;
      }
      case 'task-log': {
        const wrapper = rows.get(event.id)?.wrapper;
        if (wrapper !== undefined) wrapper.output = event.message;
        break;
      }
      case 'task-done':
        if (event.outcome === 'ran') {
          settle(event.id, { ok: true, title: `${event.id} ${c.dim(`${event.durationMs}ms${event.outputsChanged === false ? ', outputs unchanged' : ''}`)}` });
        } else if (event.outcome === 'up-to-date') settle(event.id, { ok: true, skip: `${event.id} up to date` });
        else if (event.outcome === 'skipped') settle(event.id, { ok: true, skip: `${event.id} skipped${event.because === undefined ? '' : ` (${event.because} did not succeed)`}` });
        else {
          const line = unsuccessful(event.id, event.outcome, event.error);
          settle(event.id, { ok: false, error: line });
          const detail = [`${c.red('✖')} ${line}`];
          if (event.command !== undefined) detail.push(indent(`$ ${event.command}`));
          if (event.output !== undefined && event.output.trim() !== '') detail.push(indent(event.output));
          failures.push(detail.join('\n'));
        }
        break;
      case 'task-start':
        break;
      case 'summary':
        // Printed under the finished view, after any failure's detail.
        summary = event;
        break;
      case 'warning':
      case 'transaction':
      case 'destroy-start':
      case 'destroy-done':
        fallback.sink(event);
        break;
    }
  };

  return {
    sink,
    close: async () => {
      // Rows the engine never reached (an abort) are closed so the view can end.
      for (const row of rows.values()) row.resolve({ ok: true, skip: 'not run' });
      await view;
      for (const f of failures) write(`${f}\n`);
      if (summary !== undefined) fallback.sink(summary);
      fallback.close();
    },
  };
}
