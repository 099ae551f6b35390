import path from 'node:path';
import { stateDirOf } from '../engine.ts';
import { planNodefile } from '../operations.ts';
import type { TaskId } from '../ids.ts';
import type { OutsideRead } from '../nodefile/reads.ts';
import type { PlanEntry } from '../plan/plan.ts';
import { PLAN_HEAD } from '../plan/saved.ts';
import { palette } from '../report/color.ts';
import { message } from '../report/diagnostic.ts';
import { writePlan } from '../report/plan-view.ts';
import type { TextChange } from '../transaction/text-inputs.ts';
import type { CliIo } from './output.ts';
import { refusalToWrite } from './own-file.ts';
import { orphanLine, underWayLine } from './transaction-lines.ts';
import { atomicFlag, engineOptions, paletteFor, printFailures, printJsonFailures, str, type Args } from './shared.ts';

/** A changed file input's unified diff: plain for JSON, coloured (when the terminal colours) for a person. */
interface InputDiff {
  readonly input: string;
  readonly plain: string;
  readonly colored: readonly string[];
}

async function diffsOf(texts: ReadonlyMap<TaskId, readonly TextChange[]>, io: CliIo): Promise<Map<TaskId, InputDiff[]>> {
  const { unifiedDiff } = await import('../report/text-diff.ts');
  const c = paletteFor(io);
  const plain = palette(false);
  const diffs = new Map<TaskId, InputDiff[]>();
  for (const [id, changes] of texts) {
    diffs.set(
      id,
      changes.map((change) => {
        const shown = path.relative(io.cwd, change.path) || change.path;
        return { input: change.input, plain: `${unifiedDiff(change, shown, plain).join('\n')}\n`, colored: unifiedDiff(change, shown, c) };
      }),
    );
  }
  return diffs;
}

/** The entry with each changed file input's `diff` in its reason detail. */
function withDiffs(entry: PlanEntry, diffs: readonly InputDiff[] | undefined): PlanEntry {
  if (diffs === undefined) return entry;
  const reasonDetails = entry.reasonDetails.map((d) => {
    const diff = d.kind === 'input-changed' ? diffs.find((x) => x.input === d.input) : undefined;
    return diff === undefined ? d : { ...d, diff: diff.plain };
  });
  return { ...entry, reasonDetails };
}

/** A read no generation can hold, as the plan names it. */
export function describeOutside(read: OutsideRead): string {
  switch (read.why) {
    case 'kernel':
      return `reads ${read.path} outside the generation (a kernel interface)`;
    case 'special':
      return `reads ${read.path} outside the generation (not a regular file)`;
    case 'unreadable':
      return `reads ${read.path} outside the generation (it could not be read: ${read.code})`;
    case 'fd':
      return `reads file descriptor ${read.fd} outside the generation (not opened by path)`;
    case 'process':
      return `runs ${(read.command ?? []).join(' ')} while loading: what it reads is outside the generation`;
  }
}

/** The version of `plan --json`'s document; see README "JSON". */
export const PLAN_JSON_VERSION = 1;

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'plan');
  if ('reason' in options) return printFailures([options], io);
  const out = str(args.values['out']);
  const json = args.values['json'] === true;
  const atomic = atomicFlag(args, options.targets ?? []);
  if (typeof atomic === 'string') return printFailures([{ reason: 'usage', command: 'plan', message: atomic }], io);
  const diff = args.values['diff'] === true;
  const refused = out === undefined ? undefined : refusalToWrite(path.resolve(io.cwd, out), { what: 'a saved plan', begins: PLAN_HEAD, stateDir: stateDirOf(options), nodefile: options.nodefile });
  if (refused !== undefined) {
    const failure = { reason: 'usage', command: 'plan', message: `--out ${out}: ${refused}` } as const;
    return json ? printJsonFailures([failure], io) : printFailures([failure], io);
  }
  const result = await planNodefile({
    ...options,
    ...(atomic === undefined ? {} : { atomic }),
    ...(diff ? { diff } : {}),
    ...(out === undefined ? {} : { out: path.resolve(io.cwd, out) }),
  });
  if (!result.ok) return json ? printJsonFailures(result.error, io) : printFailures(result.error, io);
  const { plan, generation, texts, refused: refusedApply } = result.value;
  const diffs = texts === undefined || texts.size === 0 ? undefined : await diffsOf(texts, io);
  if (json) {
    const entries = diffs === undefined ? plan.entries() : plan.entries().map((e) => withDiffs(e, diffs.get(e.id)));
    io.stdout.write(
      `${JSON.stringify({ format: 'nodegraph-plan-json', version: PLAN_JSON_VERSION, entries, counts: plan.counts, generation })}\n`,
    );
  } else {
    const c = paletteFor(io);
    const interrupted = generation.interrupted;
    if (interrupted !== null) {
      const from = interrupted.from === null ? 'no generation' : `generation ${interrupted.from}`;
      io.stdout.write(
        interrupted.phase === 'commit'
          ? `${c.yellow('!')} an interrupted atomic apply to generation ${interrupted.to} was healthy: the next apply finishes its commit\n`
          : `${c.yellow('!')} an interrupted atomic apply from ${from} will be rolled back by the next apply (\`apply --continue\` finishes it instead); this plan is of the machine as it is now\n`,
      );
    }
    if (generation.underWay !== null) {
      io.stdout.write(`${c.yellow('!')} ${underWayLine(generation.underWay)}; this plan is of the machine as it is now\n`);
    }
    if (generation.orphanedTransaction !== null) io.stdout.write(`${c.yellow('!')} ${orphanLine(generation.orphanedTransaction, io.cwd)}\n`);
    const below = diffs === undefined ? undefined : (e: PlanEntry): readonly string[] | undefined => diffs.get(e.id)?.flatMap((d) => d.colored);
    writePlan(plan, c, (text) => io.stdout.write(text), { verbose: args.values['verbose'] === true, width: io.stdout.isTTY === true ? process.stdout.columns || 80 : undefined, ...(below === undefined ? {} : { below }) });
    // What a rollback cannot give back, said where the change is reviewed.
    for (const read of generation.outside) io.stdout.write(`${c.yellow('!')} ${describeOutside(read)}\n`);
    if (refusedApply !== undefined) io.stdout.write(`${c.yellow('!')} apply would refuse this plan: ${message(refusedApply, io.cwd)}\n`);
    const atomicView = generation.atomic;
    if (atomicView !== null && plan.counts.unchanged < plan.size) {
      const rel = (p: string): string => path.relative(io.cwd, p) || p;
      const kept = atomicView.preserve.length === 0 ? 'preserves no path' : `preserves ${atomicView.preserve.map(rel).join(', ')}`;
      const back = atomicView.fallback === null ? 'undoes what it made' : `falls back to generation ${atomicView.fallback}`;
      const health = atomicView.health.length === 0 ? 'a check fails after it' : `the health of ${atomicView.health.join(', ')} does not hold`;
      const gone: string[] = [];
      for (const e of plan) if (e.action === 'destroy') gone.push(e.id);
      const named = gone.length <= 3 ? gone.join(', ') : `${gone.slice(0, 3).join(', ')} and ${gone.length - 3} more`;
      const retired = gone.length === 0 ? '' : ` What it no longer declares (${named}) is destroyed only once it is healthy.`;
      io.stdout.write(`Atomic: ${kept}; if a task fails or ${health}, it ${back}.${retired}\n`);
    }
    if (out !== undefined) io.stdout.write(`Saved the plan to ${out}; apply it with: nodegraph apply ${out}\n`);
  }
  const changes = plan.counts.unchanged < plan.size;
  return args.values['detailed-exitcode'] === true && changes ? 2 : 0;
}
