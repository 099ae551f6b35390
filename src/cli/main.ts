// The command line: parses arguments, loads the one command asked for (so
// `--version` loads nothing else), and owns the exit code and Ctrl-C.

import { readFileSync } from 'node:fs';
import type { ParseArgsConfig } from 'node:util';
import { COMMANDS, commandHelp, mainHelp, type CommandName } from './help.ts';
import { outputOf, type Output } from './output.ts';

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

export interface CliIo {
  readonly stdout: Output;
  readonly stderr: Output;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly signal: AbortSignal;
  /** --json was given: errors also go to stdout, as JSON lines (see printFailures). */
  readonly json?: boolean;
}

const version = (): string =>
  (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const common = {
  file: { type: 'string', short: 'f' },
  'state-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

const optionsFor: Record<CommandName, ParseArgsConfig['options']> = {
  plan: { ...common, atomic: { type: 'boolean' }, 'no-atomic': { type: 'boolean' }, out: { type: 'string' }, 'detailed-exitcode': { type: 'boolean' }, replace: { type: 'string', multiple: true }, jobs: { type: 'string', short: 'j' }, verbose: { type: 'boolean', short: 'v' } },
  apply: {
    ...common,
    jobs: { type: 'string', short: 'j' },
    'keep-going': { type: 'boolean', short: 'k' },
    replace: { type: 'string', multiple: true },
    plan: { type: 'string' },
    atomic: { type: 'boolean' },
    'no-atomic': { type: 'boolean' },
    continue: { type: 'boolean' },
    keep: { type: 'string' },
  },
  destroy: { ...common, yes: { type: 'boolean', short: 'y' } },
  stop: { ...common },
  status: { ...common, jobs: { type: 'string', short: 'j' } },
  explain: { ...common },
  graph: { ...common, format: { type: 'string' } },
  unlock: { ...common, force: { type: 'boolean' } },
  watch: { ...common, jobs: { type: 'string', short: 'j' }, debounce: { type: 'string' } },
  generations: { ...common },
  rollback: { ...common, jobs: { type: 'string', short: 'j' }, 'no-atomic': { type: 'boolean' }, keep: { type: 'string' } },
};

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
};

export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    const topic = rest[0];
    io.stdout.write(topic !== undefined && (COMMANDS as readonly string[]).includes(topic) ? commandHelp(topic as CommandName) : mainHelp());
    return first === undefined ? 1 : 0;
  }
  if (first === '--version' || first === '-V' || first === 'version') {
    io.stdout.write(`nodegraph ${version()}\n`);
    return 0;
  }
  if (!(COMMANDS as readonly string[]).includes(first)) {
    io.stderr.write(`error[usage]: unknown command ${first}; commands: ${COMMANDS.join(', ')} (see nodegraph --help)\n`);
    return 1;
  }
  const name = first as CommandName;
  let parsed;
  try {
    parsed = parseArgs({ args: [...rest], options: optionsFor[name], allowPositionals: true, strict: true });
  } catch (error) {
    const text = (error as Error).message;
    const unknown = /^Unknown option '([^']+)'/.exec(text);
    const said = unknown === null ? text : `unknown option ${unknown[1]} for ${name}`;
    io.stderr.write(`error[usage]: ${said} (see nodegraph ${name} --help)\n`);
    return 1;
  }
  if ((parsed.values as Record<string, unknown>)['help'] === true) {
    io.stdout.write(commandHelp(name));
    return 0;
  }
  const { run } = await load[name]();
  const values = parsed.values as Record<string, unknown>;
  return run({ values, positionals: parsed.positionals }, values['json'] === true ? { ...io, json: true } : io);
}

/** The process entry: wires signals and the exit code around main(). */
export async function runCli(): Promise<void> {
  const controller = new AbortController();
  const stdout = outputOf(1);
  const stderr = outputOf(2);
  let interrupts = 0;
  const onSignal = (): void => {
    // First Ctrl-C: stop cleanly (children killed, finished work recorded, lock released). Second: now.
    if (++interrupts > 1) process.exit(130);
    stderr.write('\ninterrupted: stopping running tasks (Ctrl-C again to quit at once)\n');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A dropped SSH session or terminal: as make does, the same clean stop as Ctrl-C.
  process.on('SIGHUP', onSignal);
  // Output nobody reads any more goes nowhere, and the run goes on (output.ts).
  const code = await main(process.argv.slice(2), { stdout, stderr, env: process.env, cwd: process.cwd(), signal: controller.signal });
  process.exitCode = controller.signal.aborted && code !== 0 ? 130 : code;
}
