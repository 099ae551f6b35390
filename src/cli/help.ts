// Help text for every command. Kept apart so `--help` loads no engine code.

export const COMMANDS = ['plan', 'apply', 'destroy', 'stop', 'status', 'explain', 'graph', 'unlock', 'watch', 'generations', 'rollback'] as const;
export type CommandName = (typeof COMMANDS)[number];

const COMMON = `
Common options:
  -f, --file FILE       the Nodefile (default: ./Nodefile.ts)
      --state-dir DIR   where the state lives (default: .nodegraph beside the Nodefile)
      --json            JSON lines on stdout instead of text (format: README "JSON")
  -h, --help            this help
`;

const HELP_MORE: Partial<Record<CommandName, string>> = {};

const HELP: Record<Exclude<CommandName, 'generations' | 'rollback'>, string> = {
  plan: `Usage: nodegraph plan [options] [TARGET...]

Shows what apply would do and why, changing nothing. TARGET is a task id or
PREFIX/* ; with targets, only they and what they need are planned.

Options:
      --out FILE           save the plan, bound to what it observed, for \`apply --plan FILE\`
      --detailed-exitcode  exit 0 when there is nothing to do, 2 when there are changes, 1 on error
      --replace ID         plan ID as forced to run (repeatable)
  -j, --jobs N             checks to run at once (default: the number of cores)
  -v, --verbose            list unchanged tasks too
      --atomic, --no-atomic  plan an atomic apply (what it preserves, what it falls back to), or not
${COMMON}
Exit codes: 0 ok, 1 error, 2 changes (with --detailed-exitcode).
`,
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
${COMMON}
An interrupted atomic apply (kill -9, power loss, a second Ctrl-C) is rolled
back before anything else, unless --continue.

Exit codes: 0 ok, 1 a task failed (an atomic apply: and was rolled back) or an
error, 130 interrupted.
`,
  destroy: `Usage: nodegraph destroy [options] [TARGET...]

Tears down what the state records, in reverse graph order: stop and destroy
actions, then declared outputs removed. Tasks no longer in the Nodefile are
torn down too. With targets: they, what depends on them, and upstream tasks
nothing else needs. Asks on a terminal unless --yes.

Options:
  -y, --yes            do not ask
${COMMON}
Exit codes: 0 ok, 1 a teardown failed or an error, 130 interrupted.
`,
  stop: `Usage: nodegraph stop [options] [TARGET...]

Runs stop actions in reverse graph order, keeping every file; each task it
stopped is recorded as stopped, and the next apply starts it again.
${COMMON}`,
  status: `Usage: nodegraph status [options] [TARGET...]

One line per task: applied, stale, drifted, failed, absent, or orphan.
${COMMON}`,
  explain: `Usage: nodegraph explain [options] ID

Why ID is or is not stale: each input's recorded and current hash, each
upstream's, each output's, and its check.
${COMMON}`,
  graph: `Usage: nodegraph graph [options] [TARGET...]

Prints the task graph. Trigger edges are solid, order edges dashed.

Options:
      --format F   dot (default), mermaid or json
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
};

HELP_MORE.generations = `Usage: nodegraph generations [options]

Lists the generations: each whole-graph apply that settled, with its number,
time, status (applied, failed: rolled back, pending) and what changed from the
one before (files, env values, tasks that ran). The current one is marked *.
${COMMON}
Exit codes: 0 ok, 1 error.
`;
HELP_MORE.rollback = `Usage: nodegraph rollback [options] [N]

Applies generation N (default: the one before the current) as a normal apply
would, from its stored copies: the Nodefile, its modules and its file inputs
are put back as they were in it, its env values used. A generation whose
stored files are damaged, or that needs a large file that has changed since,
is refused before anything changes. Atomic unless --no-atomic.

Options:
  -j, --jobs N         tasks to run at once
      --no-atomic      do not undo a rollback that fails
      --keep N         generations to keep (default 10)
${COMMON}
Exit codes: 0 ok, 1 refused, failed (and undone) or an error, 130 interrupted.
`;

export function commandHelp(name: CommandName): string {
  return (HELP as Partial<Record<CommandName, string>>)[name] ?? HELP_MORE[name]!;
}

export function mainHelp(): string {
  return `Usage: nodegraph COMMAND [options]

A make-style task graph that converges a machine, running only what must change.

Commands:
  plan      show what apply would do, and why
  apply     run the stale tasks
  destroy   tear down in reverse graph order
  stop      stop what tasks started, keeping their files
  status    each task: applied, stale, drifted, failed, absent
  explain   why one task is or is not stale
  graph     print the graph (dot, mermaid, json)
  unlock    remove a stale state lock
  watch     apply on every change
  generations  list what each apply applied
  rollback  apply an earlier generation again

  nodegraph COMMAND --help    options of one command
  nodegraph --version
`;
}
