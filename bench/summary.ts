// The raw data of one benchmark run (bench/results/<stamp>/summary.json), and
// its figures as a flat list, so that two runs can be put side by side figure
// by figure — also a run written before the interleaved rounds (its own format,
// read by figuresOfEarlierFormat).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TimedStep } from '../src/cli/timings.ts';
import { medianOf, median, ratioPerRound, type BlockResult, type Cell } from './rounds.ts';

export interface Machine {
  readonly date: string;
  readonly cores: number;
  readonly memory: string;
  readonly cpu: string;
  readonly kernel: string;
  readonly node: string;
  readonly ninja: string;
  readonly make: string;
  readonly hyperfine: string;
  readonly commit: string;
  /** Files under src/ and bin/ that differed from the commit (measured as they were). */
  readonly dirtyFiles: readonly string[];
  readonly spawnd: boolean;
  readonly jobs: number;
  readonly workRoot: string;
}

export interface GraphResult {
  /** `startup`, `leaves-<N>` or `chromium`. */
  readonly key: string;
  readonly title: string;
  readonly tasks?: number;
  readonly blocks: BlockResult[];
  /** Peak RSS of a no-op in KiB, the median of three, per tool. */
  readonly noopMemory?: Record<string, number>;
  /** nodegraph's no-op step by step (`--timings`): each step's median of three runs, the total last. */
  readonly noopSteps?: readonly TimedStep[];
  /** out/all byte-identical across the three tools after the full build. */
  readonly identicalOutputs?: boolean;
  /** What the scenarios did, in a line each (the prepare scripts, the changed file). */
  readonly notes: readonly string[];
}

export interface HashRun {
  readonly command: string;
  readonly ok: boolean;
  readonly output: string;
}

export interface Summary {
  readonly format: 2;
  readonly stamp: string;
  readonly machine: Machine;
  readonly rounds: number;
  readonly engine: string;
  readonly graphs: GraphResult[];
  readonly hash?: HashRun;
  readonly minutes?: number;
}

export const TOOLS = ['nodegraph', 'ninja', 'make'] as const;
export type ToolName = (typeof TOOLS)[number];

/** Tasks run, from the tool's normal output: nodegraph's summary line, ninja's `[k/n]` lines, make's echoed commands. */
export function countRan(t: ToolName): (output: string) => number | undefined {
  switch (t) {
    case 'nodegraph':
      return (o) => {
        const m = /Apply: (\d+) ran/.exec(o) ?? /Plan: (\d+) to create/.exec(o);
        return m === null ? undefined : Number(m[1]);
      };
    case 'ninja':
      return (o) => (/ninja: no work to do/.test(o) ? 0 : o.split('\n').filter((l) => /^\[\d+\/\d+\] /.test(l)).length);
    case 'make':
      return (o) => o.split('\n').filter((l) => /^(cp|cat|touch) /.test(l)).length;
  }
}

export const graphOf = (s: Summary, key: string): GraphResult | undefined => s.graphs.find((g) => g.key === key);
export const blockOf = (g: GraphResult | undefined, key: string): BlockResult | undefined => g?.blocks.find((b) => b.key === key);
export const cellOf = (b: BlockResult | undefined, label: string): Cell | undefined => b?.cells.find((c) => c.label === label);
export const leafGraphs = (s: Summary): GraphResult[] => s.graphs.filter((g) => g.key.startsWith('leaves-'));

// ---- figures ---------------------------------------------------------------------------

export interface Figure {
  /** `50,000 leaves`, `Chromium-shaped graph`, `Start-up`. */
  readonly section: string;
  /** `no-op`, `full build`, …; in the start-up block, the command itself. */
  readonly scenario: string;
  /** The tool, or (kind `ratio`) `ninja` or `make`: nodegraph's time divided by that tool's. */
  readonly label: string;
  readonly kind: 'time' | 'ratio' | 'peak';
  /** Seconds, a ratio, or KiB. */
  readonly value: number;
}

/** The scenario names both formats share, so that a figure keeps its name from run to run. */
const SCENARIO_NAMES: Record<string, string> = {
  full: 'full build',
  noop: 'no-op',
  leaf: 'one leaf changed',
  touch: 'one leaf touched',
  header: 'one header changed',
  plan: 'first plan',
  source: 'one source changed',
  one: 'one-task no-op',
};

const leafSection = (n: number): string => `${n.toLocaleString('en-US')} leaves`;

/** Every figure of a run in this format: times are medians of all runs, ratios medians of per-round ratios. */
export function figuresOf(s: Summary): Figure[] {
  const out: Figure[] = [];
  for (const g of s.graphs) {
    const section = g.key === 'startup' ? 'Start-up' : g.key === 'chromium' ? 'Chromium-shaped graph' : leafSection(Number(g.key.slice('leaves-'.length)));
    for (const b of g.blocks) {
      const scenario = SCENARIO_NAMES[b.key] ?? b.title;
      for (const c of b.cells) {
        const t = medianOf(c);
        if (t === undefined) continue;
        // The start-up block's commands are not tools: each is a figure of its own.
        if (b.key === 'start') out.push({ section, scenario: c.label, label: c.label, kind: 'time', value: t });
        else out.push({ section, scenario, label: c.label, kind: 'time', value: t });
        if (c.peakKiB.length > 0) out.push({ section, scenario, label: c.label, kind: 'peak', value: median(c.peakKiB) });
      }
      const ng = cellOf(b, 'nodegraph');
      for (const other of ['ninja', 'make']) {
        const r = ratioPerRound(ng, cellOf(b, other));
        if (r !== undefined) out.push({ section, scenario, label: other, kind: 'ratio', value: r });
      }
    }
    for (const [tool, kib] of Object.entries(g.noopMemory ?? {})) out.push({ section, scenario: 'no-op', label: tool, kind: 'peak', value: kib });
  }
  return out;
}

/** The summary.json of runs before the interleaved rounds: one hyperfine call per tool and scenario. */
interface EarlierSummary {
  readonly startup?: { readonly node?: { median: number }; readonly version?: { median: number } };
  readonly results: readonly {
    readonly n: number;
    readonly scenarios: Record<string, readonly { tool: string; time?: { median: number }; peakKiB?: number }[]>;
    readonly noopMemory: Record<string, number>;
  }[];
}

/** Figures of an earlier run, named as figuresOf names them; its ratios are ratios of medians. */
export function figuresOfEarlierFormat(s: EarlierSummary): Figure[] {
  const out: Figure[] = [];
  for (const r of s.results) {
    const section = leafSection(r.n);
    for (const [key, cells] of Object.entries(r.scenarios)) {
      const scenario = SCENARIO_NAMES[key] ?? key;
      for (const c of cells) {
        if (c.time !== undefined) out.push({ section, scenario, label: c.tool, kind: 'time', value: c.time.median });
        if (c.peakKiB !== undefined) out.push({ section, scenario, label: c.tool, kind: 'peak', value: c.peakKiB });
      }
      const ng = cells.find((c) => c.tool === 'nodegraph')?.time?.median;
      for (const other of ['ninja', 'make']) {
        const them = cells.find((c) => c.tool === other)?.time?.median;
        if (ng !== undefined && them !== undefined) out.push({ section, scenario, label: other, kind: 'ratio', value: ng / them });
      }
    }
    for (const [tool, kib] of Object.entries(r.noopMemory)) out.push({ section, scenario: 'no-op', label: tool, kind: 'peak', value: kib });
  }
  for (const [label, m] of [['node -e 0', s.startup?.node], ['nodegraph --version', s.startup?.version]] as const) {
    if (m !== undefined) out.push({ section: 'Start-up', scenario: label, label, kind: 'time', value: m.median });
  }
  return out;
}

export interface Run {
  /** The results folder, relative to the repository. */
  readonly folder: string;
  readonly label: string;
  readonly figures: Figure[];
  /** Present for a run in this format. */
  readonly summary?: Summary;
}

/** Reads a results folder's summary.json, in either format. */
export function readRun(folder: string, repo: string): Run {
  const raw = JSON.parse(readFileSync(path.join(folder, 'summary.json'), 'utf8')) as { format?: number; machine?: { commit?: string } };
  const rel = path.relative(repo, path.resolve(folder));
  const label = `${path.basename(folder)} (${raw.machine?.commit ?? '?'})`;
  if (raw.format === 2) return { folder: rel, label, figures: figuresOf(raw as Summary), summary: raw as Summary };
  return { folder: rel, label, figures: figuresOfEarlierFormat(raw as unknown as EarlierSummary) };
}
