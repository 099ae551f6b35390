// Every failure a user can see, keyed by a short kebab-case reason that is
// also the error code printed to them. report/diagnostic.ts renders each one;
// its switch ends in unreachable(), so a new failure nobody renders does not
// compile.

import type { SourceSite } from './types.ts';

export interface CycleEdge {
  readonly from: string;
  readonly to: string;
  /** 'input' for a trigger edge (consumes the output), 'after' for an order edge. */
  readonly via: 'input' | 'after';
  readonly site: SourceSite | undefined;
}

export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  readonly command: string;
  readonly startedAt: string;
}

export type Failure =
  | { readonly reason: 'usage'; readonly message: string; readonly command?: string }
  /** `suggestion`: the nearest command, when one is near enough to be meant. */
  | { readonly reason: 'unknown-command'; readonly command: string; readonly commands: readonly string[]; readonly suggestion?: string }
  /** `suggestion`: the nearest option of the command; `dryRun`: the option asks for a dry run, which is `nodegraph plan`. */
  | { readonly reason: 'unknown-option'; readonly command: string; readonly option: string; readonly suggestion?: string; readonly dryRun?: true }
  /** `folder`: the path is a folder, not a Nodefile; `suggestion`: a Nodefile in the same folder, which may be the one meant. */
  | { readonly reason: 'nodefile-not-found'; readonly path: string; readonly folder?: true; readonly suggestion?: string }
  | { readonly reason: 'nodefile-syntax'; readonly path: string; readonly message: string; readonly site: SourceSite | undefined }
  | { readonly reason: 'nodefile-threw'; readonly path: string; readonly message: string; readonly site: SourceSite | undefined }
  /** `found`: what the default export is instead of a function ("a number"), when there is one. */
  | { readonly reason: 'nodefile-no-default'; readonly path: string; readonly found?: string }
  | {
      readonly reason: 'invalid-field';
      readonly task: string | undefined;
      readonly field: string;
      readonly message: string;
      readonly site: SourceSite | undefined;
    }
  | {
      readonly reason: 'duplicate-task';
      readonly task: string;
      readonly first: SourceSite | undefined;
      readonly second: SourceSite | undefined;
    }
  | {
      readonly reason: 'unknown-task';
      readonly task: string;
      readonly field: string;
      readonly ref: string;
      readonly site: SourceSite | undefined;
    }
  | {
      readonly reason: 'duplicate-output';
      readonly path: string;
      readonly first: string;
      readonly second: string;
      readonly site: SourceSite | undefined;
    }
  | { readonly reason: 'unknown-pool'; readonly task: string; readonly pool: string; readonly site: SourceSite | undefined }
  | { readonly reason: 'cycle'; readonly edges: readonly CycleEdge[] }
  | {
      readonly reason: 'missing-input';
      readonly task: string;
      readonly input: string;
      readonly path: string;
      readonly site: SourceSite | undefined;
    }
  /** `suggestion`: the nearest task id, when one is near enough to be meant. */
  /** `plan`: an `apply` whose one target, named like a file, is no saved plan either (missing, or a file that is not one). */
  | { readonly reason: 'unknown-target'; readonly target: string; readonly suggestion?: string; readonly plan?: 'missing' | 'not-a-plan' }
  | { readonly reason: 'state-dir-unwritable'; readonly path: string; readonly message: string }
  | { readonly reason: 'state-unreadable'; readonly path: string; readonly message: string }
  /**
   * `otherHost`: the holder runs elsewhere, so whether it still runs cannot be seen from here;
   * `running`: `unlock` refused to remove the lock of a holder that runs on this host.
   */
  | { readonly reason: 'locked'; readonly path: string; readonly holder: LockHolder | undefined; readonly otherHost?: boolean; readonly running?: true }
  | { readonly reason: 'plan-file-invalid'; readonly path: string; readonly message: string }
  /** A file the command was asked to write besides the state (`plan --out`). */
  | { readonly reason: 'file-write-failed'; readonly path: string; readonly message: string }
  | { readonly reason: 'plan-stale'; readonly path: string; readonly changes: readonly string[] }
  /** A whole apply or destroy of `nodefile` would destroy, as orphans, `tasks` that only `other` (beside it, the state's last) declares. */
  | { readonly reason: 'orphans-of-another-nodefile'; readonly command: 'apply' | 'destroy'; readonly nodefile: string; readonly other: string; readonly tasks: readonly string[] }
  | { readonly reason: 'not-confirmed' }
  /**
   * Ctrl-C (or SIGTERM, SIGHUP) before anything changed: while the Nodefile loaded, or while the tasks were
   * observed (a check cut short says nothing of what is in place).
   */
  | { readonly reason: 'interrupted'; readonly during: 'load' | 'check' }
  /** A promise the Nodefile or a function of its tasks left unawaited failed: the run stops as on Ctrl-C. */
  | { readonly reason: 'unawaited-promise'; readonly message: string }
  /** An atomic apply could not begin (saving the preserved paths or the generation failed): nothing ran. */
  | { readonly reason: 'transaction-not-started'; readonly message: string }
  /** An atomic apply failed or was not healthy, and was rolled back (`rolledBack`), or not entirely (`left`). */
  | {
      readonly reason: 'atomic-apply-failed';
      readonly cause: string;
      readonly from: number | null;
      readonly to: number;
      readonly rolledBack: boolean;
      readonly left: readonly string[];
    }
  | { readonly reason: 'transaction-unreadable'; readonly path: string; readonly message: string }
  /** A command that would change the machine met an interrupted atomic apply that `apply` must finish first. */
  | { readonly reason: 'transaction-pending'; readonly from: number | null; readonly to: number; readonly phase: string }
  /** `number` missing; or, with `before`, no applied generation older than the current one (`before`, null: none yet). */
  | { readonly reason: 'generation-missing'; readonly number: number; readonly known: readonly number[]; readonly before?: number | null }
  | { readonly reason: 'generation-damaged'; readonly number: number; readonly path: string; readonly message: string }
  | { readonly reason: 'generation-file-changed'; readonly number: number; readonly path: string; readonly sha256: string }
  /** Applying generation `number` would write over these files, whose content no other kept generation holds. */
  | { readonly reason: 'generation-would-overwrite'; readonly number: number; readonly paths: readonly string[] }
  | { readonly reason: 'generation-write-failed'; readonly path: string; readonly message: string };

export type FailureReason = Failure['reason'];
