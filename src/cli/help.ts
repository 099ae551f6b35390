// Help text and options for every command. Kept apart so `--help` loads no engine code.
// A command is one entry in COMMANDS, optionsFor, SUMMARY, HELP, EXIT_CODES and ENV; the
// README's command table repeats SUMMARY's commands and EXIT_CODES word for
// word (test/integration/cli-reference.test.ts holds them together).

import type { ParseArgsConfig } from 'node:util';

export const COMMANDS = ['plan', 'apply', 'destroy', 'stop', 'status', 'explain', 'graph', 'unlock', 'watch', 'generations', 'rollback', 'completion'] as const;
export type CommandName = (typeof COMMANDS)[number];

const common = {
  file: { type: 'string', short: 'f' },
  'state-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

/** The options each command parses (parseArgs' table; shell completion reads it too). */
export const optionsFor: Record<CommandName, NonNullable<ParseArgsConfig['options']>> = {
  plan: { ...common, atomic: { type: 'boolean' }, 'no-atomic': { type: 'boolean' }, diff: { type: 'boolean' }, out: { type: 'string' }, 'detailed-exitcode': { type: 'boolean' }, replace: { type: 'string', multiple: true }, jobs: { type: 'string', short: 'j' }, verbose: { type: 'boolean', short: 'v' }, timings: { type: 'boolean' } },
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
    'metrics-file': { type: 'string' },
    timings: { type: 'boolean' },
  },
  destroy: { ...common, yes: { type: 'boolean', short: 'y' }, traces: { type: 'boolean' }, 'from-state': { type: 'boolean' } },
  stop: { ...common, 'from-state': { type: 'boolean' } },
  status: { ...common, jobs: { type: 'string', short: 'j' }, 'detailed-exitcode': { type: 'boolean' }, 'metrics-file': { type: 'string' } },
  explain: { ...common },
  graph: { ...common, format: { type: 'string' }, status: { type: 'boolean' } },
  unlock: { ...common, force: { type: 'boolean' } },
  watch: { ...common, jobs: { type: 'string', short: 'j' }, debounce: { type: 'string' } },
  generations: { ...common },
  rollback: { ...common, jobs: { type: 'string', short: 'j' }, 'no-atomic': { type: 'boolean' }, keep: { type: 'string' }, 'metrics-file': { type: 'string' } },
  completion: { help: common.help },
};

/** One line each, for `nodegraph --help`. */
export const SUMMARY: Record<CommandName, string> = {
  plan: 'show what apply would do, and why',
  apply: 'run the stale tasks',
  destroy: 'tear down in reverse graph order',
  stop: 'stop what tasks started, keeping their files',
  status: 'each task: applied, running, stale, drifted, failed, stopped, absent, trace, orphan',
  explain: 'why one task is or is not stale',
  graph: 'print the graph (dot, mermaid, json)',
  unlock: 'remove a stale state lock',
  watch: 'apply on every change',
  generations: 'list what each apply applied',
  rollback: 'apply an earlier generation again',
  completion: 'print a shell completion script (bash, zsh, fish)',
};

/** What each exit code of a command means; the README's table says the same. */
export const EXIT_CODES: Record<CommandName, string> = {
  plan: '0 ok; 1 error; 2 changes (with --detailed-exitcode); 130 interrupted',
  apply: "0 ok; 1 a task, or a plain apply's orphan, failed (an atomic apply: and was rolled back) or an error; 130 interrupted",
  destroy: '0 ok; 1 a teardown failed or an error; 130 interrupted',
  stop: '0 ok; 1 a stop failed or an error; 130 interrupted',
  status: '0 ok (all applied or running, with --detailed-exitcode); 1 error; 2 stale, drifted, failed, stopped, absent, trace or orphan (with --detailed-exitcode); 130 interrupted',
  explain: '0 ok; 1 error; 130 interrupted',
  graph: '0 ok; 1 error',
  unlock: '0 ok; 1 error',
  watch: '130 on Ctrl-C; 1 error',
  generations: '0 ok; 1 error',
  rollback: '0 ok; 1 refused, failed (and undone) or an error; 130 interrupted',
  completion: '0 ok; 1 error',
};

const COLOR_ENV = ['NO_COLOR', 'FORCE_COLOR', 'TERM'] as const;
/** Read by every command that runs task commands or checks. */
const RUN_ENV = ['NODEGRAPH_SPAWN_SERVER', ...COLOR_ENV, 'CI', 'PATH'] as const;

/** The environment variables a command reads itself (a Nodefile's `ng.env` inputs read their own). */
export const ENV: Record<CommandName, readonly string[]> = {
  plan: RUN_ENV.filter((v) => v !== 'CI'),
  apply: [...RUN_ENV, 'NODEGRAPH_METRICS_FILE'],
  destroy: RUN_ENV,
  stop: RUN_ENV,
  status: [...RUN_ENV.filter((v) => v !== 'CI'), 'NODEGRAPH_METRICS_FILE'],
  explain: RUN_ENV.filter((v) => v !== 'CI'),
  graph: [],
  unlock: [],
  watch: RUN_ENV.filter((v) => v !== 'CI'),
  generations: [],
  rollback: [...RUN_ENV, 'NODEGRAPH_METRICS_FILE'],
  completion: [],
};

const ENV_MEANING: Record<string, string> = {
  NODEGRAPH_SPAWN_SERVER: '`off`: spawn each command from nodegraph itself, not through spawnd',
  NO_COLOR: 'set and not empty: no colour',
  FORCE_COLOR: 'colour even when not on a terminal (`0` or `false`: never)',
  TERM: '`dumb`: no colour',
  CI: 'set: plain lines even on a terminal',
  NODEGRAPH_METRICS_FILE: 'the metrics file when --metrics-file is not given (empty: none)',
  PATH: 'where task commands and checks are looked up (the command\'s own `env` may change it)',
};

const COMMON = `
Common options:
  -f, --file FILE       the Nodefile (default: ./Nodefile.ts)
      --state-dir DIR   where the state lives (default: .nodegraph beside the Nodefile)
      --json            JSON on stdout instead of text, errors too: one event a line from
                        apply, destroy, stop and watch, one document from the others
                        (schemas: schemas/ in the package)
  -h, --help            this help
`;

const HELP: Record<CommandName, string> = {
  plan: `Usage: nodegraph plan [options] [TARGET...]

Shows what apply would do and why, changing nothing. TARGET is a task id or
PREFIX/* ; with targets, only they and what they need are planned.

Options:
      --out FILE           save the plan, bound to what it observed, for \`apply --plan FILE\`
      --detailed-exitcode  exit 0 when there is nothing to do, 2 when there are changes, 1 on error
      --replace ID         plan ID as forced to run (repeatable)
  -j, --jobs N             checks to run at once (default: the number of cores)
  -v, --verbose            list unchanged tasks too
      --diff               show how each changed small text file input differs from the
                           text applied (kept by the generations), line by line
      --atomic, --no-atomic  plan an atomic apply (what it preserves, what it falls back to), or not
      --timings            when done, print on stderr how long each step took (the Nodefile,
                           the analysis, the journal, observing, planning…)
${COMMON}`,
  apply: `Usage: nodegraph apply [options] [TARGET...]
       nodegraph apply [options] PLANFILE

Runs the stale tasks (and what they need), in dependency order, in parallel.
With a saved plan, applies it only if nothing it observed has changed.

Options:
  -j, --jobs N         tasks to run at once (default: the number of cores)
  -k, --keep-going     after a failure, go on with everything that does not depend on it
      --replace ID     run ID even if it is up to date (repeatable)
      --plan FILE      apply a plan saved by \`plan --out\`
      --atomic         undo the whole apply if a task fails, the graph's health does not
                       hold, or on Ctrl-C: stop what it started, destroy what it created,
                       restore the preserved paths, apply the previous generation again
      --no-atomic      not atomic, whatever the Nodefile's ng.settings say
      --continue       finish an interrupted atomic apply's change instead of rolling it back
      --keep N         generations to keep (default 10)
      --metrics-file FILE  after the run, write metrics for node_exporter's textfile
                       collector to FILE (see Environment; README: Metrics)
      --timings        when done, print on stderr how long each step took (the Nodefile,
                       the analysis, the journal, observing, planning, running, recording)
${COMMON}
An interrupted atomic apply (kill -9, power loss, a second Ctrl-C) is rolled
back before anything else, unless --continue.
`,
  destroy: `Usage: nodegraph destroy [options] [TARGET...]

Tears down what the state records, in reverse graph order: stop and destroy
actions, then declared outputs removed. Tasks no longer in the Nodefile are
torn down too. With targets: they, what depends on them, and upstream tasks
nothing else needs. Asks on a terminal unless --yes.

Options:
  -y, --yes            do not ask
      --traces         also what the Nodefile's tasks find in place that the state
                       does not record (status shows them as traces): the node a
                       lost state left, torn down with the tasks' own actions
      --from-state     from the state's records alone, without loading the Nodefile
                       (one that no longer loads: a newer nodegraph refuses it)
${COMMON}`,
  stop: `Usage: nodegraph stop [options] [TARGET...]

Runs stop actions in reverse graph order, keeping every file; each task it
stopped is recorded as stopped, and the next apply starts it again.

Options:
      --from-state     from the state's records alone, without loading the Nodefile
${COMMON}`,
  status: `Usage: nodegraph status [options] [TARGET...]

One line per task: applied, running (applied, and what it started runs),
stale, drifted, failed, stopped, absent, trace (never recorded, but its check
finds in place what it would tear down), or orphan; then a summary line, and who holds the state lock if anyone does.

Options:
      --detailed-exitcode  exit 0 when every task is applied, 2 when one is not, 1 on error
  -j, --jobs N             checks to run at once (default: the number of cores)
      --metrics-file FILE  after the run, write metrics for node_exporter's textfile
                           collector to FILE, tasks by status among them
${COMMON}`,
  explain: `Usage: nodegraph explain [options] ID

Why ID is or is not stale: each input's recorded and current hash, each
upstream's, each output's, and its check.
${COMMON}`,
  graph: `Usage: nodegraph graph [options] [TARGET...]

Prints the task graph: with targets, they and what they need. Tasks are
grouped by namespace (kube1/, host/); trigger edges are solid and named after
the input, order edges dashed.

Options:
      --format F   dot (default), mermaid or json
      --status     colour each task by its status (as \`nodegraph status\` says it)
${COMMON}`,
  unlock: `Usage: nodegraph unlock [options]

Removes the state lock, saying whose it was. Only for a lock left by a
nodegraph that is gone (a lock from a dead process on this host is taken
over by itself). A lock held by a process still running on this host is
refused without --force.

Options:
      --force          remove the lock even if its holder is running here
${COMMON}`,
  watch: `Usage: nodegraph watch [options] [TARGET...]

Applies, then applies again whenever the Nodefile or an input changes.

Options:
  -j, --jobs N         tasks to run at once
      --debounce MS    quiet time before a run (default 200)
${COMMON}`,
  generations: `Usage: nodegraph generations [options]

Lists the generations: each whole-graph apply that settled, with its number,
time, status (applied, failed: rolled back, pending) and what changed from the
one before (files, env values, tasks that ran). The current one is marked *.
${COMMON}`,
  rollback: `Usage: nodegraph rollback [options] [N]

Applies generation N (default: the one before the current) as a normal apply
would, from its stored copies: the Nodefile, its modules and its file inputs
are put back as they were in it, its env values used. A generation whose
stored files are damaged, or that needs a large file that has changed since,
is refused before anything changes. Atomic unless --no-atomic.

Options:
  -j, --jobs N         tasks to run at once
      --no-atomic      do not undo a rollback that fails
      --keep N         generations to keep (default 10)
      --metrics-file FILE  after the run, write metrics for node_exporter's textfile
                       collector to FILE
${COMMON}`,
  completion: `Usage: nodegraph completion bash|zsh|fish

Prints a completion script for the shell: commands, their options, and task
ids from the Nodefile (\`nodegraph graph --format json\`). Load it with
  bash:  source <(nodegraph completion bash)
  zsh:   source <(nodegraph completion zsh)
  fish:  nodegraph completion fish | source
`,
};

export function commandHelp(name: CommandName): string {
  const env = ENV[name];
  const envText = env.length === 0 ? '' : `\nEnvironment:\n${env.map((v) => `  ${v.padEnd(24)}${ENV_MEANING[v] ?? ''}`).join('\n')}\n`;
  return `${HELP[name]}\nExit codes: ${EXIT_CODES[name]}.\n${envText}`;
}

export function mainHelp(): string {
  return `Usage: nodegraph COMMAND [options]

A make-style task graph that converges a machine, running only what must change.

Commands:
${COMMANDS.map((name) => `  ${name.padEnd(11)} ${SUMMARY[name]}`).join('\n')}

  nodegraph COMMAND --help    options of one command
  nodegraph --version
`;
}
