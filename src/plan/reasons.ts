// A task's reasons as the one line a person reads. A task that gathers many
// others has a reason for each of them: a library over 100 objects is "known
// after" each of the 100 while they are pending, and "upstream … changed" for
// each that changed. Joined whole, that is a line of thousands of characters
// in the middle of a plan. The line names the first few and counts the rest;
// `plan --json`, the JSON events' plan and `nodegraph explain` keep them all.

/** How many reasons (and how many ids of one "known after") a line names before it counts the rest. */
export const REASONS_SHOWN = 3;

const KNOWN_AFTER = 'known after ';

/**
 * The reasons joined with "; ", consecutive "known after X" merged into one
 * "known after X, Y, Z", and each list cut to REASONS_SHOWN with the rest
 * counted ("and 97 more"). A list one longer than that is shown whole: "and 1
 * more" would save nothing. `more` is appended when something was left out
 * (say, where to read it all).
 */
export function reasonsLine(reasons: readonly string[], more = ''): string {
  const merged: string[] = [];
  let cut = false;
  for (let i = 0; i < reasons.length; ) {
    if (!reasons[i]!.startsWith(KNOWN_AFTER)) {
      merged.push(reasons[i++]!);
      continue;
    }
    const ids: string[] = [];
    for (; i < reasons.length && reasons[i]!.startsWith(KNOWN_AFTER); i++) ids.push(reasons[i]!.slice(KNOWN_AFTER.length));
    merged.push(`${KNOWN_AFTER}${shortList(ids, ', ', ' ')}`);
    cut ||= ids.length > REASONS_SHOWN + 1;
  }
  cut ||= merged.length > REASONS_SHOWN + 1;
  const line = shortList(merged, '; ', '; ');
  return cut && more !== '' ? `${line} ${more}` : line;
}

function shortList(items: readonly string[], separator: string, beforeCount: string): string {
  if (items.length <= REASONS_SHOWN + 1) return items.join(separator);
  return `${items.slice(0, REASONS_SHOWN).join(separator)}${beforeCount}and ${items.length - REASONS_SHOWN} more`;
}

/** One change inside a value input, at a key path (`logLevel`, `mirrors["docker.io"][0]`); `from`/`to` as JSON, absent when added/removed. */
export interface ValueChange {
  readonly path: string;
  readonly from?: string;
  readonly to?: string;
}

/**
 * Why a task acts, as data: what `plan --json`, `explain --json`, `status
 * --json` and the plan event carry beside the prose (`reasonText` of each).
 * Hashes are shortened as the prose shows them; `explain --json` has them whole.
 */
export type ReasonDetail =
  | { readonly kind: 'never-ran' }
  /** It ran, and a destroy (or a retirement) took it: the journal has its tombstone. */
  | { readonly kind: 'destroyed' }
  | { readonly kind: 'forced' }
  | { readonly kind: 'last-run-failed'; readonly error?: string }
  | { readonly kind: 'last-run-canceled' }
  | { readonly kind: 'stopped' }
  | { readonly kind: 'definition-changed'; readonly from: string; readonly to: string }
  | { readonly kind: 'input-added'; readonly input: string }
  /** `sensitive`: an env input or a value marked sensitive, whose change is not shown; `changes`: a value input's, key by key. */
  /** `diff` (plan --diff): a small text file input's change, as a unified diff. */
  | {
      readonly kind: 'input-changed';
      readonly input: string;
      readonly sensitive?: true;
      readonly from?: string;
      readonly to?: string;
      readonly changes?: readonly ValueChange[];
      readonly diff?: string;
    }
  | { readonly kind: 'input-removed'; readonly input: string }
  | { readonly kind: 'upstream-added'; readonly task: string }
  | { readonly kind: 'upstream-changed'; readonly task: string; readonly from: string; readonly to: string }
  | { readonly kind: 'upstream-removed'; readonly task: string }
  | { readonly kind: 'known-after'; readonly task: string }
  | { readonly kind: 'output-missing'; readonly path: string }
  | { readonly kind: 'output-modified'; readonly path: string }
  /**
   * The record names no such output: it was made elsewhere (a project moved or copied), or
   * the outputs changed. `ranIn`: the folder the last run ran in, when it is not the task's now.
   */
  | { readonly kind: 'output-unrecorded'; readonly path: string; readonly ranIn?: string }
  | { readonly kind: 'check-failed'; readonly detail: string }
  /** `kept`: the task retires by stopping in place (`retire: 'stop'`). */
  | { readonly kind: 'orphan'; readonly kept?: true };

export type ReasonKind = ReasonDetail['kind'];

/** How many of a value's changed keys the prose names before it counts the rest. */
const CHANGES_SHOWN = 3;
/**
 * A value longer than this is cut in the plan's and status's prose, which then point at `explain`; `explain`
 * and the JSON detail have it whole. A URL, a path, a version string fit: they are shown whole, wrapped.
 */
export const VALUE_SHOWN = 400;

const cut = (json: string, whole: boolean): string => (whole || json.length <= VALUE_SHOWN ? json : `${json.slice(0, VALUE_SHOWN - 1)}…`);

function changeText(c: ValueChange, whole: boolean): string {
  const at = c.path === '' ? '' : `${c.path}: `;
  return `${at}${c.from === undefined ? '(none)' : cut(c.from, whole)} → ${c.to === undefined ? '(none)' : cut(c.to, whole)}`;
}

/** The prose of a reason, as plan, status and explain show it; `whole`: values never cut (explain). */
export function reasonText(r: ReasonDetail, whole = false): string {
  switch (r.kind) {
    case 'never-ran':
      return 'never ran';
    case 'destroyed':
      return 'was destroyed';
    case 'forced':
      return 'forced by --replace';
    case 'last-run-failed':
      return r.error === undefined ? 'last run failed' : `last run failed: ${r.error}`;
    case 'last-run-canceled':
      return 'last run was canceled';
    case 'stopped':
      return 'stopped by nodegraph stop';
    case 'definition-changed':
      return `definition changed ${r.from}→${r.to}`;
    case 'input-added':
      return `input ${r.input} added`;
    case 'input-changed': {
      if (r.sensitive === true) return `input ${r.input} changed (sensitive)`;
      if (r.changes === undefined) return `input ${r.input} changed ${r.from}→${r.to}`;
      const shown = r.changes.length <= CHANGES_SHOWN + 1 ? r.changes : r.changes.slice(0, CHANGES_SHOWN);
      const more = r.changes.length - shown.length;
      return `input ${r.input} changed: ${shown.map((c) => changeText(c, whole)).join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
    }
    case 'input-removed':
      return `input ${r.input} removed`;
    case 'upstream-added':
      return `now consumes ${r.task}`;
    case 'upstream-changed':
      return `upstream ${r.task} changed ${r.from}→${r.to}`;
    case 'upstream-removed':
      return `no longer consumes ${r.task}`;
    case 'known-after':
      return `${KNOWN_AFTER}${r.task}`;
    case 'output-missing':
      return `output ${r.path} missing`;
    case 'output-modified':
      return `output ${r.path} modified outside nodegraph`;
    case 'output-unrecorded':
      return `output ${r.path} is not one its last run recorded${r.ranIn === undefined ? '' : ` (it ran in ${r.ranIn})`}`;
    case 'check-failed':
      return r.detail === '' ? 'check failed' : `check failed: ${r.detail}`;
    case 'orphan':
      return r.kept === true ? 'orphan: no longer in the Nodefile, stopped and kept in place' : 'orphan: no longer in the Nodefile';
  }
}
