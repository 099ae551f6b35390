import path from 'node:path';
import { planNodefile } from '../operations.ts';
import { writePlan } from '../report/plan-view.ts';
import type { CliIo } from './main.ts';
import { engineOptions, paletteFor, printFailures, printJsonFailures, str, type Args } from './shared.ts';

/** The version of `plan --json`'s document; see README "JSON". */
export const PLAN_JSON_VERSION = 1;

export async function run(args: Args, io: CliIo): Promise<number> {
  const options = engineOptions(args, io, 'plan');
  if ('reason' in options) return printFailures([options], io);
  const out = str(args.values['out']);
  const json = args.values['json'] === true;
  const warnings: string[] = [];
  const result = await planNodefile({
    ...options,
    ...(out === undefined ? {} : { out: path.resolve(io.cwd, out) }),
    onEvent: (e) => {
      if (e.type === 'warning') warnings.push(e.message);
    },
  });
  for (const w of warnings) io.stderr.write(`warning: ${w}\n`);
  if (!result.ok) return json ? printJsonFailures(result.error, io) : printFailures(result.error, io);
  const { plan } = result.value;
  if (json) {
    io.stdout.write(
      `${JSON.stringify({ format: 'nodegraph-plan-json', version: PLAN_JSON_VERSION, entries: plan.entries(), counts: plan.counts })}\n`,
    );
  } else {
    writePlan(plan, paletteFor(io), (text) => io.stdout.write(text), { verbose: args.values['verbose'] === true });
    if (out !== undefined) io.stdout.write(`Saved the plan to ${out}; apply it with: nodegraph apply ${out}\n`);
  }
  const changes = plan.counts.unchanged < plan.size;
  return args.values['detailed-exitcode'] === true && changes ? 2 : 0;
}
