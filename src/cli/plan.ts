import path from 'node:path';
import { planNodefile } from '../operations.ts';
import { writePlan } from '../report/plan-view.ts';
import type { CliIo } from './main.ts';
import { atomicFlag, engineOptions, paletteFor, printFailures, printJsonFailures, str, type Args } from './shared.ts';

/** The version of `plan --json`'s document; see README "JSON". */
export const PLAN_JSON_VERSION = 1;

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'plan');
  if ('reason' in options) return printFailures([options], io);
  const out = str(args.values['out']);
  const json = args.values['json'] === true;
  const warnings: string[] = [];
  const atomic = atomicFlag(args);
  if (typeof atomic === 'string') return printFailures([{ reason: 'usage', message: atomic }], io);
  const result = await planNodefile({
    ...options,
    ...(atomic === undefined ? {} : { atomic }),
    ...(out === undefined ? {} : { out: path.resolve(io.cwd, out) }),
    onEvent: (e) => {
      if (e.type === 'warning') warnings.push(e.message);
    },
  });
  for (const w of warnings) io.stderr.write(`warning: ${w}\n`);
  if (!result.ok) return json ? printJsonFailures(result.error, io) : printFailures(result.error, io);
  const { plan, generation } = result.value;
  if (json) {
    io.stdout.write(
      `${JSON.stringify({ format: 'nodegraph-plan-json', version: PLAN_JSON_VERSION, entries: plan.entries(), counts: plan.counts, generation })}\n`,
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
    writePlan(plan, c, (text) => io.stdout.write(text), { verbose: args.values['verbose'] === true });
    const atomicView = generation.atomic;
    if (atomicView !== null && plan.counts.unchanged < plan.size) {
      const rel = (p: string): string => path.relative(io.cwd, p) || p;
      const kept = atomicView.preserve.length === 0 ? 'preserves no path' : `preserves ${atomicView.preserve.map(rel).join(', ')}`;
      const back = atomicView.fallback === null ? 'undoes what it made' : `falls back to generation ${atomicView.fallback}`;
      const health = atomicView.health.length === 0 ? 'every check passing' : `the health of ${atomicView.health.join(', ')}`;
      const retired = plan.counts.destroy === 0 ? '' : ` What it no longer declares (${plan.counts.destroy}) is destroyed once it is healthy.`;
      io.stdout.write(`Atomic: ${kept}; if a task fails or ${health} does not hold, it ${back}.${retired}\n`);
    }
    if (out !== undefined) io.stdout.write(`Saved the plan to ${out}; apply it with: nodegraph apply ${out}\n`);
  }
  const changes = plan.counts.unchanged < plan.size;
  return args.values['detailed-exitcode'] === true && changes ? 2 : 0;
}
