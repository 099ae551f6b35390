// The plan as a person reads it: one line per task that would act, its
// action and why (wrapped under its column at the terminal's width), then a
// summary line and a legend of the symbols used.

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
      return entry.verb === 'stop' ? c.yellow('S') : c.red('-');
    case 'unchanged':
      return ' ';
    default:
      return unreachable(entry.action);
  }
}

/** What each symbol means, in the order the legend names them. */
const LEGEND: readonly (readonly [string, (c: Palette) => string, string])[] = [
  ['create', (c) => c.green('+'), 'create'],
  ['update', (c) => c.yellow('~'), 'update'],
  ['restart', (c) => c.yellow('R'), 'restart'],
  ['replace', (c) => c.red('±'), 'replace'],
  ['drift', (c) => c.red('!'), 'drifted'],
  ['maybe', (c) => c.cyan('?'), 'known after apply'],
  ['destroy', (c) => c.red('-'), 'destroy'],
  ['stop', (c) => c.yellow('S'), 'stop and keep'],
];

const legendKey = (e: PlanEntry): string =>
  (e.action === 'update' && e.verb === 'restart') || (e.action === 'destroy' && e.verb === 'stop') ? e.verb : e.action;

/** `+ create  ~ update  - destroy`: the symbols the listed entries use, and only those; '' for none. */
export function legendLine(used: ReadonlySet<string>, c: Palette): string {
  return LEGEND.filter(([key]) => used.has(key))
    .map(([, sym, words]) => `${sym(c)} ${words}`)
    .join('  ');
}

/**
 * `words` wrapped to `width` columns, each line after the first indented by `hang` spaces; a word longer than a
 * line is cut where the line ends. Colors are added after: `words` is plain text.
 */
export function hangingWrap(words: string, first: number, hang: number, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  let room = width - first;
  for (const word of words.split(' ')) {
    let w = word;
    const sep = line === '' ? '' : ' ';
    if ([...line].length + sep.length + [...w].length <= room) {
      line += sep + w;
      continue;
    }
    if (line !== '') lines.push(line);
    room = width - hang;
    line = '';
    // A word wider than a whole line (a long value): cut into lines, nothing of it lost.
    while ([...w].length > room) {
      lines.push([...w].slice(0, room).join(''));
      w = [...w].slice(room).join('');
    }
    line = w;
  }
  lines.push(line);
  return lines;
}

export function summaryLine(plan: Plan): string {
  const n = plan.counts;
  const parts = [`${n.create} to create`, `${n.update + n.drift} to update`];
  // Shown as ± in the list: counted apart, as Terraform counts what it replaces.
  if (n.replace > 0) parts.push(`${n.replace} to replace`);
  if (n.maybe > 0) parts.push(`${n.maybe} known after apply`);
  parts.push(`${n.destroy} to destroy`);
  if (n.stop > 0) parts.push(`${n.stop} to stop and keep`);
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
  options: {
    verbose?: boolean;
    below?: (entry: PlanEntry) => readonly string[] | undefined;
    /** The terminal's width: the reasons wrap at it under their column; unset (a pipe), each entry is one line. */
    width?: number | undefined;
  } = {},
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
  // The reasons start in a column of their own; wrapped, they go on under it (under a narrow one, 6 columns in).
  const column = 2 + 1 + 1 + idWidth + 2 + verbWidth + 2;
  const width = options.width;
  const hang = width !== undefined && column > width / 2 ? 6 : column;
  const used = new Set<string>();
  let piece = '';
  for (const e of plan) {
    if (!shown(e)) continue;
    if (e.action !== 'unchanged') used.add(legendKey(e));
    // A value cut in the prose ends in `…`, a value's changes counted end in `and N more`: the line says where to
    // read them whole, as it does for the reasons it counts.
    const pointer = `(all: nodegraph explain ${e.id})`;
    let reasons = reasonsLine(e.reasons, pointer);
    if (!reasons.endsWith(pointer) && e.reasons.some((r) => r.includes('…') || / and \d+ more$/.test(r))) reasons += ` ${pointer}`;
    const head = `  ${symbol(e, c)} ${e.id.padEnd(idWidth)}  ${e.verb.padEnd(verbWidth)}  `;
    const start = 2 + 1 + 1 + Math.max(idWidth, e.id.length) + 2 + verbWidth + 2;
    // Under a head that leaves the reasons no room, they start on the next line.
    const wrapped = width === undefined ? [reasons] : width - start < 12 ? ['', ...hangingWrap(reasons, hang, hang, width)] : hangingWrap(reasons, start, hang, width);
    piece += `${`${head}${c.dim(wrapped[0]!)}`.trimEnd()}\n`;
    for (const more of wrapped.slice(1)) piece += `${' '.repeat(hang)}${c.dim(more)}\n`;
    for (const more of options.below?.(e) ?? []) piece += `      ${more}\n`;
    if (piece.length >= PLAN_CHUNK) {
      write(piece);
      piece = '';
    }
  }
  const legend = legendLine(used, c);
  piece += `${summaryLine(plan)}\n`;
  if (legend !== '') piece += `${c.dim(legend)}\n`;
  write(piece);
}

/** The plan as one string, without a final newline (writePlan's pieces, joined). */
export function renderPlan(plan: Plan, c: Palette, options: { verbose?: boolean; width?: number } = {}): string {
  const pieces: string[] = [];
  writePlan(plan, c, (text) => pieces.push(text), options);
  return pieces.join('').slice(0, -1);
}
