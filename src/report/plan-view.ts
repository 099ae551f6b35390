// The plan as a person reads it: one line per task that would act, its
// action and why, then a summary line.

import type { Plan, PlanEntry } from '../plan/plan.ts';
import { unreachable } from '../util/unreachable.ts';
import { reasonsLine } from '../plan/reasons.ts';
import type { Palette } from './color.ts';

function symbol(entry: PlanEntry, c: Palette): string {
  switch (entry.action) {
    case 'create':
      return c.green('+');
    case 'update':
      return entry.verb === 'restart' ? c.yellow('R') : c.yellow('~');
    case 'replace':
      return c.red('±');
    case 'drift':
      return c.red('!');
    case 'maybe':
      return c.cyan('?');
    case 'destroy':
      return c.red('-');
    case 'unchanged':
      return ' ';
    default:
      return unreachable(entry.action);
  }
}

export function summaryLine(plan: Plan): string {
  const n = plan.counts;
  const parts = [`${n.create} to create`, `${n.update + n.drift} to update`];
  // Shown as ± in the list: counted apart, as Terraform counts what it replaces.
  if (n.replace > 0) parts.push(`${n.replace} to replace`);
  if (n.maybe > 0) parts.push(`${n.maybe} known after apply`);
  parts.push(`${n.destroy} to destroy`);
  return `Plan: ${parts.join(', ')}; ${n.unchanged} unchanged.`;
}

export function renderPlan(plan: Plan, c: Palette, options: { verbose?: boolean } = {}): string {
  const acting = plan.entries.filter((e) => e.action !== 'unchanged' || options.verbose === true);
  if (acting.length === 0) return `No changes: ${plan.counts.unchanged} task${plan.counts.unchanged === 1 ? '' : 's'} up to date.`;
  // Loops, not Math.max(...widths): a first plan of some 150,000 tasks would overflow the stack.
  let idWidth = 0;
  let verbWidth = 0;
  for (const e of acting) {
    idWidth = Math.max(idWidth, e.id.length);
    verbWidth = Math.max(verbWidth, e.verb.length);
  }
  idWidth = Math.min(48, idWidth);
  const lines = acting.map(
    (e) => `  ${symbol(e, c)} ${e.id.padEnd(idWidth)}  ${e.verb.padEnd(verbWidth)}  ${c.dim(reasonsLine(e.reasons, `(all: nodegraph explain ${e.id})`))}`.trimEnd(),
  );
  return [...lines, summaryLine(plan)].join('\n');
}
