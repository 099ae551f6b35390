// One run's raw data (summary.ts) as the Markdown that bench/run.ts splices
// into BENCHMARKS.md: the targets (issue 45's), a table per graph, and, given
// an earlier run, the two side by side figure by figure.

import path from 'node:path';
import { fmtMiB, fmtTime, median, medianOf, perRound, ratioPerRound, type BlockResult, type Cell } from './rounds.ts';
import { blockOf, cellOf, figuresOf, graphOf, leafGraphs, TOOLS, type Figure, type GraphResult, type Run, type Summary } from './summary.ts';

const fmtRatio = (r: number | undefined): string => (r === undefined || !Number.isFinite(r) ? '–' : `${r.toFixed(r < 10 ? 2 : 1)}×`);
const fmtMs = (s: number): string => `${(s * 1000).toFixed(1)} ms`;
const fmtUs = (s: number): string => `${(s * 1e6).toFixed(2)} µs`;
const n = (v: number): string => v.toLocaleString('en-US');

// ---- targets -----------------------------------------------------------------------

interface Target {
  readonly what: string;
  readonly bound: string;
  readonly figure: string;
  readonly status: 'aim met' | 'met' | 'missed' | 'not measured';
}

function target(what: string, value: number | undefined, must: number, aim: number | undefined, show: (v: number) => string, bound: string, extra = ''): Target {
  if (value === undefined) return { what, bound, figure: 'not measured', status: 'not measured' };
  const status = aim !== undefined && value <= aim ? 'aim met' : value <= must ? 'met' : 'missed';
  return { what, bound, figure: show(value) + extra, status };
}

const ratioOf = (g: GraphResult | undefined, key: string, other = 'ninja'): number | undefined => {
  const b = blockOf(g, key);
  return ratioPerRound(cellOf(b, 'nodegraph'), cellOf(b, other));
};

/** The larger of the full build's and the no-op's peak ratio to ninja's. */
function memoryRatio(g: GraphResult | undefined): number | undefined {
  const full = blockOf(g, 'full');
  const peak = (c: Cell | undefined): number | undefined => (c === undefined || c.peakKiB.length === 0 ? undefined : median(c.peakKiB));
  const ratios: number[] = [];
  const a = peak(cellOf(full, 'nodegraph'));
  const b = peak(cellOf(full, 'ninja'));
  if (a !== undefined && b !== undefined) ratios.push(a / b);
  const c = g?.noopMemory?.['nodegraph'];
  const d = g?.noopMemory?.['ninja'];
  if (c !== undefined && d !== undefined) ratios.push(c / d);
  return ratios.length === 0 ? undefined : Math.max(...ratios);
}

/** Per-task cost of a no-op: (t(largest graph) − t(one task)) / (its tasks − 1), for one tool. */
export function perTaskCost(s: Summary, tool: string): number | undefined {
  const largest = leafGraphs(s).at(-1);
  const big = medianOf(cellOf(blockOf(largest, 'noop'), tool));
  const one = medianOf(cellOf(blockOf(graphOf(s, 'startup'), 'one'), tool));
  if (largest?.tasks === undefined || big === undefined || one === undefined) return undefined;
  return (big - one) / (largest.tasks - 1);
}

function targetsOf(s: Summary): Target[] {
  const largest = leafGraphs(s).at(-1);
  const at = largest === undefined ? '' : ` at ${n(Number(largest.key.slice('leaves-'.length)))}`;
  const out: Target[] = [
    target(`no-op${at}`, ratioOf(largest, 'noop'), 2, 1.3, fmtRatio, '≤ 2.0× ninja (aim 1.3×)'),
    target(`one leaf's content changed${at}`, ratioOf(largest, 'leaf'), 2, 1.5, fmtRatio, '≤ 2.0× ninja (aim 1.5×)'),
    target(
      `one leaf's content changed${at}, against nodegraph's own no-op`,
      ratioPerRound(cellOf(blockOf(largest, 'leaf'), 'nodegraph'), cellOf(blockOf(largest, 'noop'), 'nodegraph')),
      1.3,
      undefined,
      fmtRatio,
      "≤ 1.3× nodegraph's own no-op",
    ),
    target(`one header changed${at}`, ratioOf(largest, 'header'), 1.5, undefined, fmtRatio, '≤ 1.5× ninja'),
  ];
  for (const g of leafGraphs(s)) {
    const touch = cellOf(blockOf(g, 'touch'), 'nodegraph');
    const noop = cellOf(blockOf(g, 'noop'), 'nodegraph');
    const ratio = ratioPerRound(touch, noop);
    const ran = touch?.ran ?? [];
    const zero = ran.length > 0 && ran.every((r) => r === 0) && (touch?.jsonRan ?? 0) === 0;
    const what = `one leaf touched, content unchanged, at ${n(Number(g.key.slice('leaves-'.length)))}`;
    const bound = "0 tasks, ≤ nodegraph's own no-op (5 % allowed for noise)";
    if (ratio === undefined || touch === undefined) out.push({ what, bound, figure: 'not measured', status: 'not measured' });
    else out.push({ what, bound, figure: `${ran.join(', ')} task(s); ${fmtRatio(ratio)} its no-op`, status: zero && ratio <= 1.05 ? 'met' : 'missed' });
  }
  const ng = perTaskCost(s, 'nodegraph');
  const nj = perTaskCost(s, 'ninja');
  out.push(
    target(
      'per-task cost of a no-op, (t(largest) − t(1 task)) / (tasks − 1)',
      ng === undefined || nj === undefined ? undefined : ng / nj,
      2,
      1.2,
      fmtRatio,
      "≤ 2× ninja's (aim 1.2×)",
      ng === undefined || nj === undefined ? '' : ` (${fmtUs(ng)} against ${fmtUs(nj)})`,
    ),
  );
  const cr = graphOf(s, 'chromium');
  const crNoop = cellOf(blockOf(cr, 'noop'), 'nodegraph');
  out.push(
    target('Chromium-shaped graph: no-op', ratioOf(cr, 'noop'), 2, 1.3, fmtRatio, '≤ 2.0× ninja (aim 1.3×)'),
    target(
      'Chromium-shaped graph: one source changed',
      ratioPerRound(cellOf(blockOf(cr, 'source'), 'nodegraph'), crNoop),
      1.3,
      undefined,
      fmtRatio,
      "≤ 1.3× nodegraph's own no-op",
    ),
    target('Chromium-shaped graph: first `plan`', medianOf(cellOf(blockOf(cr, 'plan'), 'nodegraph')), 2, undefined, fmtTime, '≤ 2 s'),
    target(`full build${at}`, ratioOf(largest, 'full', 'make'), 1.1, undefined, fmtRatio, '≤ 1.1× make'),
    target(`peak memory${at} (the larger of full build and no-op)`, memoryRatio(largest), 3, 2, fmtRatio, '≤ 3× ninja (aim 2×)'),
    target('peak memory, Chromium-shaped graph (the larger of full build and no-op)', memoryRatio(cr), 3, 2, fmtRatio, '≤ 3× ninja (aim 2×)'),
  );
  const start = graphOf(s, 'startup');
  const overNode = perRound(cellOf(blockOf(start, 'one'), 'nodegraph'), cellOf(blockOf(start, 'start'), 'node -e 0'), (a, b) => a - b);
  out.push(target('a one-task no-op', overNode, 0.03, undefined, (v) => `node -e 0 + ${fmtMs(v)}`, '≤ `node -e 0` + 30 ms'));
  out.push({
    what: 'the container node no-op apply',
    bound: "the checks' critical path + ≤ 100 ms",
    figure: 'not part of `npm run bench`: the e2e image (test/e2e)',
    status: 'not measured',
  });
  return out;
}

// ---- tables -------------------------------------------------------------------------

function ranText(cell: Cell | undefined): string {
  if (cell === undefined) return '–';
  const values = [...new Set(cell.ran.map((r) => (r === null ? '?' : String(r))))];
  const ok = cell.expected === undefined || cell.ran.every((r) => r === cell.expected);
  const text = ok ? values.join('/') : `**${values.join('/')}** (expected ${cell.expected})`;
  if (cell.jsonRan === undefined) return text;
  return `${text} [json ${cell.jsonRan === cell.expected || cell.expected === undefined ? cell.jsonRan : `**${cell.jsonRan}**`}]`;
}

function timeText(cell: Cell | undefined): string {
  if (cell === undefined) return '–';
  const t = medianOf(cell);
  if (t === undefined) return `failed: ${cell.errors[0] ?? '?'}`;
  return fmtTime(t) + (cell.errors.length > 0 ? ` (${cell.errors.length} round(s) failed)` : '');
}

const loadText = (b: BlockResult): string => {
  const lo = Math.min(...b.loadavg);
  const hi = Math.max(...b.loadavg);
  return lo === hi ? lo.toFixed(2) : `${lo.toFixed(2)}–${hi.toFixed(2)}`;
};

function toolTable(g: GraphResult): string[] {
  const lines = [
    `### ${g.title}`,
    '',
    '| scenario | rounds × runs | nodegraph | ninja | make | nodegraph ÷ ninja | nodegraph ÷ make | tasks run: nodegraph [--json] / ninja / make | load average |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const b of g.blocks) {
    const cells = TOOLS.map((t) => cellOf(b, t));
    lines.push(
      `| ${b.title} | ${b.rounds} × ${b.runs} | ${cells.map(timeText).join(' | ')} | ${fmtRatio(ratioOf(g, b.key))} | ${fmtRatio(ratioOf(g, b.key, 'make'))} | ${cells.map(ranText).join(' / ')} | ${loadText(b)} |`,
    );
  }
  const memRow = (label: string, get: (t: string) => number | undefined): void => {
    const [a, b, c] = TOOLS.map(get);
    if (a === undefined && b === undefined && c === undefined) return;
    const r = (x: number | undefined, y: number | undefined): string => fmtRatio(x === undefined || y === undefined ? undefined : x / y);
    lines.push(`| ${label} | | ${[a, b, c].map((v) => (v === undefined ? '–' : fmtMiB(v))).join(' | ')} | ${r(a, b)} | ${r(a, c)} | | |`);
  };
  for (const b of g.blocks) {
    if (b.cells.some((c) => c.peakKiB.length > 0)) {
      memRow(`peak RSS, ${b.title} (median of its runs)`, (t) => {
        const c = cellOf(b, t);
        return c === undefined || c.peakKiB.length === 0 ? undefined : median(c.peakKiB);
      });
    }
  }
  if (g.noopMemory !== undefined) memRow('peak RSS, no-op (median of 3)', (t) => g.noopMemory?.[t]);
  lines.push('');
  if (g.identicalOutputs !== undefined) lines.push(`- out/all byte-identical across the three tools after the full build: ${g.identicalOutputs ? 'yes' : '**no**'}.`);
  stepsLine(g, lines);
  for (const note of g.notes) lines.push(`- ${note}`);
  if (g.notes.length > 0 || g.identicalOutputs !== undefined) lines.push('');
  return lines;
}

/** nodegraph's no-op step by step, as `--timings` gives it. */
function stepsLine(g: GraphResult, lines: string[]): void {
  if (g.noopSteps === undefined) return;
  const steps = g.noopSteps.map((s) => `${s.name} ${fmtMs(s.ms / 1000)}${s.detail === '' ? '' : ` (${s.detail})`}`);
  lines.push(`- nodegraph's no-op step by step (\`apply --timings\`, the median of three runs each): ${steps.join(', ')}.`);
}

function startupTable(s: Summary, g: GraphResult): string[] {
  const lines = [`### ${g.title}`, '', '| command | rounds × runs | median | load average |', '| --- | --- | --- | --- |'];
  for (const b of g.blocks) {
    for (const c of b.cells) {
      const name = b.key === 'start' ? `\`${c.label}\`` : `${b.title}: ${c.label}`;
      lines.push(`| ${name} | ${b.rounds} × ${b.runs} | ${timeText(c)} | ${loadText(b)} |`);
    }
  }
  const over = perRound(cellOf(blockOf(g, 'one'), 'nodegraph'), cellOf(blockOf(g, 'start'), 'node -e 0'), (a, b) => a - b);
  lines.push('');
  if (over !== undefined) lines.push(`nodegraph's one-task no-op takes \`node -e 0\` + ${fmtMs(over)} (the median of per-round differences).`, '');
  const largest = leafGraphs(s).at(-1);
  const costs = ['nodegraph', 'ninja', 'make'].map((t) => ({ t, cost: perTaskCost(s, t) }));
  if (largest !== undefined && costs.some((c) => c.cost !== undefined)) {
    lines.push(
      `Per-task cost of a no-op, (t(${n(largest.tasks ?? 0)} tasks) − t(1 task)) / ${n((largest.tasks ?? 1) - 1)}, from the medians: ` +
        costs.map((c) => `${c.t} ${c.cost === undefined ? '–' : fmtUs(c.cost)}`).join(', ') +
        '.',
      '',
    );
  }
  stepsLine(g, lines);
  for (const note of g.notes) lines.push(`- ${note}`);
  if (g.notes.length > 0) lines.push('');
  return lines;
}

// ---- side by side -------------------------------------------------------------------

/**
 * A row per graph and scenario: nodegraph's time and its ratios to ninja's and make's, and where
 * measured its peak RSS and that ratio to ninja's, each before → after. In `after`'s order, then
 * what only `before` measured.
 */
export function sideBySide(before: Run, after: Run): string[] {
  const index = (figures: readonly Figure[]): Map<string, number> => new Map(figures.map((f) => [`${f.section}|${f.scenario}|${f.kind}|${f.label}`, f.value]));
  const b = index(before.figures);
  const a = index(after.figures);
  const rows: { section: string; scenario: string; label: string }[] = [];
  const seen = new Set<string>();
  for (const f of [...after.figures, ...before.figures]) {
    // One row per scenario, through nodegraph's figures (the start-up block's commands are their own).
    if (f.kind === 'ratio' || (f.label !== 'nodegraph' && f.label !== f.scenario)) continue;
    const key = `${f.section}|${f.scenario}`;
    if (seen.has(key)) continue;
    seen.add(key);
    rows.push({ section: f.section, scenario: f.scenario, label: f.label });
  }
  const lines = [
    `### Side by side: ${before.label} and ${after.label}`,
    '',
    `Each figure of this run beside the same figure of [${path.basename(before.folder)}](${before.folder}/)` +
      (before.summary === undefined ? ', whose ratios are ratios of medians (it measured each tool in one block per scenario)' : '') +
      ': nodegraph\'s time, its ratio to ninja\'s and to make\'s, its peak RSS and that ratio to ninja\'s; before → after.',
    '',
    '| graph | scenario | nodegraph | ÷ ninja | ÷ make | peak RSS | ÷ ninja |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  const pair = (x: string, y: string): string => (x === '–' && y === '–' ? '' : `${x} → ${y}`);
  for (const r of rows) {
    const get = (m: Map<string, number>, kind: string, label: string): number | undefined => m.get(`${r.section}|${r.scenario}|${kind}|${label}`);
    const show = (v: number | undefined, f: (v: number) => string): string => (v === undefined ? '–' : f(v));
    const peakRatio = (m: Map<string, number>): number | undefined => {
      const x = get(m, 'peak', r.label);
      const y = get(m, 'peak', 'ninja');
      return x === undefined || y === undefined || r.label !== 'nodegraph' ? undefined : x / y;
    };
    const cells = [
      pair(show(get(b, 'time', r.label), fmtTime), show(get(a, 'time', r.label), fmtTime)),
      pair(show(get(b, 'ratio', 'ninja'), fmtRatio), show(get(a, 'ratio', 'ninja'), fmtRatio)),
      pair(show(get(b, 'ratio', 'make'), fmtRatio), show(get(a, 'ratio', 'make'), fmtRatio)),
      pair(show(get(b, 'peak', r.label), fmtMiB), show(get(a, 'peak', r.label), fmtMiB)),
      pair(show(peakRatio(b), fmtRatio), show(peakRatio(a), fmtRatio)),
    ];
    lines.push(`| ${r.section} | ${r.scenario} | ${cells.join(' | ')} |`);
  }
  lines.push('');
  return lines;
}

// ---- the whole report -----------------------------------------------------------------

export function report(s: Summary, repo: string, resultsDir: string, earlier: Run | undefined): string {
  const m = s.machine;
  const rel = path.relative(repo, resultsDir);
  const lines: string[] = [
    `Run of ${m.date} (commit ${m.commit}${m.dirtyFiles.length > 0 ? `, with uncommitted ${m.dirtyFiles.map((f) => `\`${f}\``).join(', ')}` : ''})` +
      `${s.minutes === undefined ? '' : `; took ${s.minutes.toFixed(0)} min`}. Raw data: [${rel}/](${rel}/).`,
    '',
    `Engine: ${s.engine}; task commands started by ${m.spawnd ? 'spawnd' : 'plain spawn (no spawnd was built)'}. ` +
      `Machine: ${m.cores} cores (${m.cpu}), ${m.memory}, ${m.kernel}; Node ${m.node}, ninja ${m.ninja}, ${m.make}, ${m.hyperfine}; ` +
      `-j ${m.jobs} for all three tools.`,
    '',
    `Times are medians of every measured run; a ratio is the median of per-round ratios (${s.rounds} rounds unless the table says fewer). ` +
      '"tasks run" is read from each round\'s last run; in brackets, nodegraph once more with `--json`. A count in bold is not what the scenario should run.',
    '',
    '### Targets',
    '',
    '| target | bound | figure | |',
    '| --- | --- | --- | --- |',
  ];
  for (const t of targetsOf(s)) lines.push(`| ${t.what} | ${t.bound} | ${t.figure} | ${t.status === 'missed' ? '**missed**' : t.status} |`);
  lines.push('');
  for (const g of s.graphs) lines.push(...(g.key === 'startup' ? startupTable(s, g) : toolTable(g)));
  if (earlier !== undefined) {
    lines.push(...sideBySide(earlier, { folder: rel, label: `${path.basename(resultsDir)} (${m.commit})`, figures: figuresOf(s), summary: s }));
  }
  if (s.hash !== undefined) {
    // The lines that bound other figures: hashing against sha256sum, and what a stat per file costs.
    const headline = s.hash.output.split('\n').filter((l) => /^(sha256sum|sha256FileSync|no-op:|bare statSync)/.test(l));
    lines.push('### Hashing (bench/hash.ts)', '', `\`${s.hash.command}\`${s.hash.ok ? '' : ' (**failed**)'}, in part (all of it in [hash.txt](${rel}/hash.txt)):`, '', '```', ...headline, '```', '');
  }
  return lines.join('\n');
}
