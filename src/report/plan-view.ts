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

/** About how much text writePlan hands to `write` at a time. */
export const PLAN_CHUNK = 64 * 1024;

/**
 * The plan as renderPlan renders it (with its final newline), handed to
 * `write` a piece of about PLAN_CHUNK characters at a time. A first plan of
 * 50,000 tasks is some 3 MB of text; made whole, its lines, their join and the
 * bytes written would be alive at once, some 15 MiB; in pieces, one piece is.
 */
export function writePlan(
  plan: Plan,
  c: Palette,
  write: (text: string) => void,
  /** `below`: lines shown under an entry's line (a file input's diff). */
  options: { verbose?: boolean; below?: (entry: PlanEntry) => readonly string[] | undefined } = {},
): void {
  const shown = (e: PlanEntry): boolean => e.action !== 'unchanged' || options.verbose === true;
  // Loops, not Math.max(...widths): a first plan of some 150,000 tasks would overflow the stack.
  // Counted, not looked at: a plan that changes nothing says so without making its 50,000 entries.
  const acting = options.verbose === true ? plan.size : plan.size - plan.counts.unchanged;
  if (acting === 0) {
    write(`No changes: ${plan.counts.unchanged} task${plan.counts.unchanged === 1 ? '' : 's'} up to date.\n`);
    return;
  }
  let idWidth = 0;
  let verbWidth = 0;
  for (const e of plan) {
    if (!shown(e)) continue;
    idWidth = Math.max(idWidth, e.id.length);
    verbWidth = Math.max(verbWidth, e.verb.length);
  }
  idWidth = Math.min(48, idWidth);
  let piece = '';
  for (const e of plan) {
    if (!shown(e)) continue;
    const line = `  ${symbol(e, c)} ${e.id.padEnd(idWidth)}  ${e.verb.padEnd(verbWidth)}  ${c.dim(reasonsLine(e.reasons, `(all: nodegraph explain ${e.id})`))}`;
    piece += `${line.trimEnd()}\n`;
    for (const more of options.below?.(e) ?? []) piece += `      ${more}\n`;
    if (piece.length >= PLAN_CHUNK) {
      write(piece);
      piece = '';
    }
  }
  write(`${piece}${summaryLine(plan)}\n`);
}

/** The plan as one string, without a final newline (writePlan's pieces, joined). */
export function renderPlan(plan: Plan, c: Palette, options: { verbose?: boolean } = {}): string {
  const pieces: string[] = [];
  writePlan(plan, c, (text) => pieces.push(text), options);
  return pieces.join('').slice(0, -1);
}
