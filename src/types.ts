// The types every layer shares, below the Nodefile API that re-exports them:
// a command, a JSON value, a place in a Nodefile.

/** An argv, run without a shell. */
export type Argv = readonly string[];

/** A command: an argv, or an explicit shell line when the task asks for one. */
export type Command = Argv | { readonly shell: string };

export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

/** Where in the Nodefile something was declared. */
export interface SourceSite {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

/**
 * The error a record carries when `nodegraph stop` stopped its task (status
 * 'failed', the rest of the record kept): the next apply starts it again, and
 * plan and status say why (plan/decide.ts, cli/status.ts).
 */
export const STOPPED = 'stopped';
/** A task's record while its stop or destroy runs: cut short (a failure, a kill), the task is done again, not trusted as applied. */
export const TEARDOWN_BEGUN = { stop: 'a stop was begun and did not finish', destroy: 'a destroy was begun and did not finish' } as const;
