// `--timings`: where a run's time went, step by step, printed on stderr when it
// ends, as ninja's `-d stats` and cargo's `--timings` do. The engine says when
// each step ends (EngineOptions.onPhase); a step's time is since the one before,
// so the steps add up to the run. `start` is Node's own: from the process's
// start (performance's time origin) to the command line.

const HEADING = 'Timings (each step since the one before):\n';
const STEP = /^ {2}(\S+(?: \S+)?) +(\d+\.\d) ms(?: {2}(.*))?$/;

export interface Timings {
  /** Ends a step: given to the engine as onPhase. */
  readonly mark: (phase: string, detail?: string) => void;
  /** The steps so far, one a line, and their total. */
  readonly text: () => string;
}

export function timings(): Timings {
  const steps: { readonly phase: string; readonly at: number; readonly detail: string | undefined }[] = [];
  const mark = (phase: string, detail?: string): void => void steps.push({ phase, at: performance.now(), detail });
  mark('start');
  const text = (): string => {
    const rows = steps.map((step, i) => ({ phase: step.phase, ms: step.at - (i === 0 ? 0 : steps[i - 1]!.at), detail: step.detail }));
    rows.push({ phase: 'total', ms: steps.at(-1)!.at, detail: undefined });
    const width = Math.max(...rows.map((r) => r.phase.length));
    const lines = rows.map((r) => `  ${r.phase.padEnd(width)}  ${r.ms.toFixed(1).padStart(9)} ms${r.detail === undefined ? '' : `  ${r.detail}`}`);
    return `${HEADING}${lines.join('\n')}\n`;
  };
  return { mark, text };
}

export interface TimedStep {
  readonly name: string;
  readonly ms: number;
  readonly detail: string;
}

/** The steps of the `--timings` block in `text` (a command's stderr), total last; undefined when it has none. */
export function readTimings(text: string): TimedStep[] | undefined {
  const at = text.indexOf(HEADING);
  if (at === -1) return undefined;
  const steps: TimedStep[] = [];
  for (const line of text.slice(at + HEADING.length).split('\n')) {
    const m = STEP.exec(line);
    if (m === null) break;
    steps.push({ name: m[1]!, ms: Number(m[2]), detail: m[3] ?? '' });
  }
  return steps;
}
