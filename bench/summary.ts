// The raw data of one benchmark run (bench/results/<stamp>/summary.json).

import type { BlockResult, Cell } from './rounds.ts';

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

export const graphOf = (s: Summary, key: string): GraphResult | undefined => s.graphs.find((g) => g.key === key);
export const blockOf = (g: GraphResult | undefined, key: string): BlockResult | undefined => g?.blocks.find((b) => b.key === key);
export const cellOf = (b: BlockResult | undefined, label: string): Cell | undefined => b?.cells.find((c) => c.label === label);
export const leafGraphs = (s: Summary): GraphResult[] => s.graphs.filter((g) => g.key.startsWith('leaves-'));
