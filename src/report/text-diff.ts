// A file input's change as a unified diff, as `git diff` shows one: the one
// module that imports jsdiff (`diff`), loaded only by `plan --diff` and
// `explain` when a file input changed.

import { structuredPatch } from 'diff';
import type { TextChange } from '../transaction/text-inputs.ts';
import type { Palette } from './color.ts';

/** `--- path (applied)`, `+++ path (now)`, then the hunks with 2 lines of context; coloured when `c` colours. */
export function unifiedDiff(change: TextChange, shownPath: string, c: Palette): string[] {
  const patch = structuredPatch(`${shownPath} (applied)`, `${shownPath} (now)`, change.before, change.after, undefined, undefined, { context: 2 });
  const lines = [c.bold(`--- ${patch.oldFileName}`), c.bold(`+++ ${patch.newFileName}`)];
  for (const hunk of patch.hunks) {
    lines.push(c.cyan(`@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`));
    for (const line of hunk.lines) lines.push(line.startsWith('+') ? c.green(line) : line.startsWith('-') ? c.red(line) : line);
  }
  return lines;
}
