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
