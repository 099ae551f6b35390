// What the commands share: turning flags into engine options, choosing a
// reporter, printing failures.

import path from 'node:path';
import type { EngineOptions } from '../engine.ts';
import type { Failure } from '../error.ts';
import { colorEnabled, palette, type Palette } from '../report/color.ts';
import { renderFailure } from '../report/diagnostic.ts';
import { keepTaskLogs } from '../report/recap.ts';
import type { Reporter } from '../report/reporter.ts';
import type { CliIo } from './output.ts';

export interface Args {
  readonly values: Record<string, unknown>;
  readonly positionals: string[];
}

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export const list = (v: unknown): string[] => (Array.isArray(v) ? (v as string[]) : []);

export function paletteFor(io: CliIo, stream: { readonly isTTY: boolean } = io.stdout): Palette {
  return palette(colorEnabled(stream, io.env));
}

/** Where a command's own plain lines go: stdout, but stderr under --json, whose stdout carries JSON alone. */
export const plainOut = (io: CliIo): CliIo['stdout'] => (io.json === true ? io.stderr : io.stdout);

export function engineOptions(args: Args, io: CliIo, command: string): EngineOptions | Failure {
  // A blank path resolves to the working folder: the state would be written among the project's files.
  for (const [option, what] of [['file', 'the Nodefile'], ['state-dir', 'a folder']] as const) {
    const given = str(args.values[option]);
    if (given !== undefined && given.trim() === '') return { reason: 'usage', command, message: `--${option} takes ${what}, not ${JSON.stringify(given)}` };
  }
  const nodefile = path.resolve(io.cwd, str(args.values['file']) ?? 'Nodefile.ts');
  const jobsText = str(args.values['jobs']);
  let jobs: number | undefined;
  if (jobsText !== undefined) {
    jobs = positiveWhole(jobsText);
    if (jobs === undefined) return { reason: 'usage', command, message: `--jobs takes a whole number of at least 1, not ${JSON.stringify(jobsText)}` };
  }
  const stateDir = str(args.values['state-dir']);
  const dirs = { nodefile, ...(stateDir === undefined ? {} : { stateDir: path.resolve(io.cwd, stateDir) }) };
  return {
    ...dirs,
    ...(jobs === undefined ? {} : { jobs }),
    targets: args.positionals,
    replace: list(args.values['replace']),
    keepGoing: args.values['keep-going'] === true,
    signal: io.signal,
    command: `nodegraph ${command}`,
    env: io.env,
    ...(io.onPhase === undefined ? {} : { onPhase: io.onPhase }),
    // Said as it happens, on stderr (a check waited on says so while it runs); apply and destroy give their reporter.
    onEvent: (event) => void (event.type === 'warning' && io.stderr.write(`warning: ${event.message}\n`)),
  };
}

/** Each failure on stderr as a person reads it; with --json, first on stdout as `{"v":1,"type":"error","time":…,"failure":…}` lines. */
export function printFailures(failures: readonly Failure[], io: CliIo): number {
  const time = new Date().toISOString();
  if (io.json === true) for (const failure of failures) io.stdout.write(`${JSON.stringify({ v: 1, type: 'error', time, failure })}\n`);
  const c = paletteFor(io, io.stderr);
  for (const failure of failures) io.stderr.write(`${renderFailure(failure, io.cwd, c)}\n`);
  return 1;
}

export function printJsonFailures(failures: readonly Failure[], io: CliIo): number {
  return printFailures(failures, { ...io, json: true });
}

/**
 * The reporter of a command that runs tasks (apply, destroy, stop, watch, rollback): JSON lines with --json,
 * the live view on a terminal (unless `live` is false), plain lines otherwise. Whichever it is, each task's
 * output is kept under `stateDir` and its events name the file (report/recap.ts): here, once for every command.
 */
export async function reporterFor(args: Args, io: CliIo, stateDir: string, options: { readonly live?: boolean } = {}): Promise<Reporter> {
  const reporter = await chooseReporter(args, io, options.live !== false);
  return { sink: keepTaskLogs(stateDir, reporter.sink), close: () => reporter.close() };
}

async function chooseReporter(args: Args, io: CliIo, live: boolean): Promise<Reporter> {
  const write = (text: string): void => void io.stdout.write(text);
  if (args.values['json'] === true) {
    const { jsonReporter } = await import('../report/json.ts');
    return jsonReporter(write);
  }
  const c = paletteFor(io);
  if (live && io.stdout.isTTY === true && io.env['CI'] === undefined) {
    const { ttyReporter } = await import('../report/tty.ts');
    return ttyReporter({ write, c, columns: () => process.stdout.columns || 80, rows: () => process.stdout.rows || 24, signal: io.signal });
  }
  const { plainReporter } = await import('../report/plain.ts');
  return plainReporter({ write, c });
}

/** --atomic / --no-atomic: true, false, undefined (the Nodefile decides), or what is wrong. */
export function atomicFlag(args: Args, targets: readonly string[]): boolean | undefined | string {
  const on = args.values['atomic'] === true;
  const off = args.values['no-atomic'] === true;
  if (on && off) return '--atomic and --no-atomic contradict each other: give one';
  // A targeted apply records no generation, so it has none to fall back to: it would run as a plain one.
  if (on && targets.length > 0) return `--atomic applies the whole graph as one generation, so it takes no targets (${targets.join(' ')}): give them without it, or the whole graph with it`;
  return on ? true : off ? false : undefined;
}

/** --keep N: generations to keep. */
export function keepFlag(args: Args): number | undefined | string {
  const text = str(args.values['keep']);
  if (text === undefined) return undefined;
  return positiveWhole(text) ?? `--keep takes a whole number of at least 1, not ${JSON.stringify(text)}`;
}

/** A count written in decimal digits and at least 1, as make's -j takes it; Number() alone would take '', ' 2', '0x2' and '1e3'. */
export function positiveWhole(text: string): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const n = Number(text);
  return n >= 1 && Number.isSafeInteger(n) ? n : undefined;
}
