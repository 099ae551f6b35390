// The command line: parses arguments, loads the one command asked for (so
// `--version` loads nothing else), and owns the exit code and Ctrl-C.

import { readFileSync } from 'node:fs';
import type { Failure } from '../error.ts';
import { COMMANDS, commandHelp, mainHelp, optionsFor, type CommandName } from './help.ts';
import { drained, outputOf, type CliIo } from './output.ts';

// Built-ins that every run uses are taken with process.getBuiltinModule, here
// and in the engine's modules, not imported: an ES import of a built-in builds
// its whole namespace first (node:crypto's loads WebCrypto), and those of
// node:crypto, node:util, node:zlib, node:fs/promises, node:os and node:buffer
// cost milliseconds of CPU at each start. node:fs stays an import in the
// sources, and the bundle takes it the same way (scripts/build-dist.ts: its
// namespace loads fs/promises and the streams). node:fs/promises is not loaded
// at all by a small no-op (only large files are read with it; Node's glob,
// behind a glob input, loads it itself).
const { parseArgs } = process.getBuiltinModule('node:util');

const version = (): string =>
  (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

type Run = (args: { values: Record<string, unknown>; positionals: string[] }, io: CliIo) => Promise<number>;

// One literal import per command, so only the command asked for is loaded (and compiling to JS can rewrite them).
const load: Record<CommandName, () => Promise<{ run: Run }>> = {
  plan: () => import('./plan.ts'),
  apply: () => import('./apply.ts'),
  destroy: () => import('./destroy.ts'),
  stop: () => import('./stop.ts'),
  status: () => import('./status.ts'),
  explain: () => import('./explain.ts'),
  graph: () => import('./graph.ts'),
  unlock: () => import('./unlock.ts'),
  watch: () => import('./watch.ts'),
  generations: () => import('./generations.ts'),
  rollback: () => import('./rollback.ts'),
  completion: () => import('./completion.ts'),
};

export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  // Before the arguments are understood, --json anywhere still asks for errors as JSON.
  const failed = async (failure: Failure): Promise<number> => {
    const { printFailures } = await import('./shared.ts');
    return printFailures([failure], argv.includes('--json') ? { ...io, json: true } : io);
  };
  const unknownCommand = async (word: string): Promise<number> => {
    const { nearest } = await import('../util/nearest.ts');
    const suggestion = nearest(word, COMMANDS);
    return failed({ reason: 'unknown-command', command: word, commands: COMMANDS, ...(suggestion === undefined ? {} : { suggestion }) });
  };
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    // An option after help (--json, -h) is no topic.
    const topic = rest[0]?.startsWith('-') === true ? undefined : rest[0];
    if (topic !== undefined && !(COMMANDS as readonly string[]).includes(topic)) return unknownCommand(topic);
    io.stdout.write(topic !== undefined ? commandHelp(topic as CommandName) : mainHelp());
    return first === undefined ? 1 : 0;
  }
  if (first === '--version' || first === '-V' || first === 'version') {
    io.stdout.write(`nodegraph ${version()}\n`);
    return 0;
  }
  if (!(COMMANDS as readonly string[]).includes(first)) return unknownCommand(first);
  const name = first as CommandName;
  let parsed;
  try {
    parsed = parseArgs({ args: [...rest], options: optionsFor[name], allowPositionals: true, strict: true });
  } catch (error) {
    const { nearest } = await import('../util/nearest.ts');
    return failed(parseFailure(name, error as Error & { code?: string }, nearest, rest));
  }
  if ((parsed.values as Record<string, unknown>)['help'] === true) {
    io.stdout.write(commandHelp(name));
    return 0;
  }
  const values = parsed.values as Record<string, unknown>;
  // Under --json stdout is JSON lines: what the Nodefile's code logs (console.log in its body or a task) goes to stderr.
  if (values['json'] === true) console.log = console.info = console.debug = console.error;
  // --timings: each step's time on stderr when the command ends (timings.ts); loaded only then.
  const timed = values['timings'] === true ? (await import('./timings.ts')).timings() : undefined;
  const { run } = await load[name]();
  timed?.mark('load');
  const code = await run(
    { values, positionals: parsed.positionals },
    { ...io, ...(values['json'] === true ? { json: true } : {}), ...(timed === undefined ? {} : { onPhase: timed.mark }) },
  );
  // `finish`: what the command did after the engine's last step (the plan printed, the reporter's last lines, metrics).
  timed?.mark('finish');
  if (timed !== undefined) io.stderr.write(timed.text());
  return code;
}

const DRY_RUN = '--dry-run';

/** A parseArgs error in nodegraph's words: which option, and what is wrong with it. */
function parseFailure(command: CommandName, error: Error & { code?: string }, nearest: (word: string, candidates: readonly string[]) => string | undefined, args: readonly string[]): Failure {
  const options = optionsFor[command];
  // parseArgs reads `-v=1` as the flags -v, -= and -1: the value given to a flag is what is wrong there.
  const flagged = /^-([^-=])=/.exec(args.find((a) => /^-[^-=]=/.test(a)) ?? '')?.[1];
  const flag = flagged === undefined ? undefined : Object.entries(options).find(([, spec]) => spec.short === flagged && spec.type === 'boolean')?.[0];
  if (flag !== undefined) return { reason: 'usage', command, message: `--${flag} (-${flagged}) takes no value` };
  const spelled = /'(-[^',\s]+)(?:, (--[^'\s]+))?/.exec(error.message);
  const written = spelled?.[2] ?? spelled?.[1] ?? '';
  // A short option (-j) by its long name (--jobs), which the help lists and the messages use.
  const short = /^-([^-])$/.exec(written)?.[1];
  const long = short === undefined ? undefined : Object.entries(options).find(([, spec]) => spec.short === short)?.[0];
  const option = long === undefined ? written : `--${long}`;
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const names = Object.keys(options).map((o) => `--${o}`);
    const suggestion = option.startsWith('--') ? nearest(option, names) : undefined;
    // No command has --dry-run: what it (or a typo of it) asks for is `plan`.
    if (suggestion === undefined && option.startsWith('--') && (option === DRY_RUN || nearest(option, [DRY_RUN]) !== undefined)) {
      return { reason: 'unknown-option', command, option, dryRun: true };
    }
    return { reason: 'unknown-option', command, option, ...(suggestion === undefined ? {} : { suggestion }) };
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const takesValue = options[option.replace(/^--/, '')]?.type === 'string';
    // parseArgs does not take the next word as a value when it begins with a dash (`-j -1`).
    const dashed = takesValue && /ambiguous/.test(error.message) ? ` (one that begins with a dash is written ${option}=VALUE)` : '';
    return { reason: 'usage', command, message: takesValue ? `${option} needs a value${dashed}` : `${option} takes no value` };
  }
  return { reason: 'usage', command, message: error.message };
}

/** The process entry: wires signals and the exit code around main(). */
export async function runCli(): Promise<void> {
  const controller = new AbortController();
  const stdout = outputOf(1);
  const stderr = outputOf(2);
  // The Nodefile's code (its body, a function task, a check) that calls process.exit would end the run with
  // children running and the lock held, and exit 0: the call throws there instead, an error of that code (the
  // Nodefile does not load, the task fails). nodegraph itself exits through `exit`.
  const exit = process.exit.bind(process);
  process.exit = ((code?: number | string | null) => {
    throw new Error(`process.exit(${code ?? ''}) was called: nodegraph ends its own run, and this code cannot end it`);
  }) as typeof process.exit;
  let interrupts = 0;
  const onSignal = (): void => {
    // First Ctrl-C: stop cleanly (children killed, finished work recorded, lock released). Second: now.
    if (++interrupts > 1) exit(130);
    // Aborted first: the live view clears its area on the abort, so the notice is not drawn over.
    controller.abort();
    stderr.write('\ninterrupted: stopping running tasks (Ctrl-C again to quit at once)\n');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A dropped SSH session or terminal: as make does, the same clean stop as Ctrl-C.
  process.on('SIGHUP', onSignal);
  // A promise nobody awaits that fails (`void ctx.exec(…)` in a function task, one left in the Nodefile) would end
  // the process with children running and the lock held: the run stops as on Ctrl-C, and exits 1. Nothing awaits
  // such a promise, so the run's own chain goes on to its end. (A synchronous throw from a timer still ends the
  // process, as Node has it; the next run ends what it left, as after a kill -9.)
  let stray = false;
  process.on('unhandledRejection', (reason) => {
    const first = !stray;
    stray = true;
    process.exitCode = 1;
    // An error as any other: with its code, and under --json as an error line on stdout too.
    const failure = { reason: 'unawaited-promise', message: reason instanceof Error ? reason.message : String(reason) } as const;
    const json = process.argv.includes('--json');
    // The abort waits for the error to be said (shared.ts is loaded already, by the command).
    void import('./shared.ts').then(({ printFailures }) => {
      printFailures([failure], { stdout, stderr, env: process.env, cwd: process.cwd(), signal: controller.signal, json });
      if (first && !controller.signal.aborted) {
        controller.abort();
        stderr.write('stopping running tasks\n');
      }
    });
  });
  // Output nobody reads any more goes nowhere, and the run goes on (output.ts).
  const code = await main(process.argv.slice(2), { stdout, stderr, env: process.env, cwd: process.cwd(), signal: controller.signal });
  // The run is over, whatever the Nodefile's code left scheduled (a timer, a socket): that must not keep it
  // alive. What a stream still holds (a full pipe: output.ts) goes out first.
  await drained();
  exit(stray ? 1 : controller.signal.aborted && code !== 0 ? 130 : code);
}
