import { listGenerations } from '../operations.ts';
import { stateDirOf } from '../engine.ts';
import { runningHolder } from '../state/lock.ts';
import type { CliIo } from './output.ts';
import { underWayLine } from './transaction-lines.ts';
import { engineOptions, paletteFor, printFailures, type Args } from './shared.ts';

/** The version of `generations --json`'s document. */
export const GENERATIONS_JSON_VERSION = 1;

export async function run(args: Args, io: CliIo): Promise<number> {
  if (args.positionals.length > 0) {
    const message = `generations takes no arguments (it lists them all; rollback N goes back to one), not ${args.positionals.join(' ')}`;
    return printFailures([{ reason: 'usage', command: 'generations', message }], io);
  }
  const options = engineOptions(args, io, 'generations');
  if ('reason' in options) return printFailures([options], io);
  const listed = listGenerations(options);
  if (!listed.ok) return printFailures(listed.error, io);
  const { generations, current, transaction, damaged } = listed.value;
  // A transaction whose run still holds the lock is under way, not interrupted.
  const running = transaction === undefined ? undefined : runningHolder(stateDirOf(options));
  const holder = running === undefined ? null : { pid: running.pid, host: running.host, command: running.command, startedAt: running.startedAt };
  if (args.values['json'] === true) {
    io.stdout.write(`${JSON.stringify({ format: 'nodegraph-generations', version: GENERATIONS_JSON_VERSION, current: current ?? null, transaction: transaction ?? null, transactionHolder: holder, generations, damaged })}\n`);
    return 0;
  }
  const c = paletteFor(io);
  if (generations.length === 0 && damaged.length === 0) io.stdout.write('No generations yet: each whole-graph apply that settles records one.\n');
  // Damaged ones in their place by number: a gap in the list would hide them.
  let next = 0;
  const damagedBefore = (n: number): void => {
    for (; next < damaged.length && damaged[next]!.number < n; next++) {
      const d = damaged[next]!;
      io.stdout.write(`${c.red('!')} ${String(d.number).padStart(3)}  damaged: ${d.message} (${d.path}); a rollback to it is refused\n`);
    }
  };
  for (const g of generations) {
    damagedBefore(g.number);
    const mark = g.number === current ? c.green('*') : ' ';
    const status = g.status === 'applied' ? '' : g.status === 'failed' ? c.red(' failed, rolled back') : c.yellow(` ${g.status}`);
    const changed = [
      g.files.length > 0 ? `files: ${shortList(g.files)}` : '',
      g.env.length > 0 ? `env: ${shortList(g.env)}` : '',
      g.ran.length > 0 ? `ran: ${shortList(g.ran)}` : '',
      g.destroyed.length > 0 ? `destroyed: ${shortList(g.destroyed)}` : '',
    ].filter((x) => x !== '');
    io.stdout.write(`${mark} ${String(g.number).padStart(3)}  ${g.createdAt}${status}  ${c.dim(changed.join('; ') || 'no change')}\n`);
  }
  damagedBefore(Infinity);
  if (current === undefined && generations.length > 0) io.stdout.write(c.dim('none is current: a whole destroy took what was applied, or no apply has held yet; `nodegraph rollback N` applies one\n'));
  if (transaction !== undefined && holder !== null) {
    io.stdout.write(`${c.yellow('!')} ${underWayLine({ ...transaction, holder })}\n`);
  } else if (transaction !== undefined) {
    io.stdout.write(`${c.yellow('!')} an interrupted atomic apply from ${transaction.from ?? 'no generation'} to ${transaction.to} (${transaction.phase}): the next apply rolls it back (--continue: finishes it)\n`);
  }
  return 0;
}

function shortList(items: readonly string[]): string {
  return items.length <= 4 ? items.join(', ') : `${items.slice(0, 3).join(', ')} and ${items.length - 3} more`;
}
