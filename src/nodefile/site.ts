// Where a declaration was made. Capturing a stack is cheap; formatting it is
// not, so the site is captured as an Error and only parsed when a diagnostic
// needs it (a 50,000-task graph pays for the capture alone).

import { fileURLToPath } from 'node:url';
import type { SourceSite } from './types.ts';

const apiDir = new URL('.', import.meta.url).href;
// A path that begins the frame's location: not the `/modules/…` inside `node:internal/modules/…`.
const frame = /(?:^|[\s(])((?:file:\/\/|\/)[^()\s]+?):(\d+):(\d+)\)?$/;

/** Where a declaration was made, parsed only when a diagnostic asks. */
export interface SiteRef {
  get(): SourceSite | undefined;
}

/** The site of a declaration loaded without sites (see Builder's `sites` option). */
export const NO_SITE: SiteRef = { get: () => undefined };

export class LazySite implements SiteRef {
  readonly #trace: Error;
  readonly #prefer: string | undefined;
  #site: SourceSite | undefined | null = null;

  constructor(trace: Error, prefer: string | undefined) {
    this.#trace = trace;
    this.#prefer = prefer;
  }

  get(): SourceSite | undefined {
    if (this.#site === null) this.#site = parseSite(this.#trace.stack ?? '', this.#prefer);
    return this.#site;
  }
}

/**
 * Captures the stack above `entry` (the API function the Nodefile called), so
 * the first frame is the Nodefile's own — or a helper's that it called, a few
 * frames up at most. `prefer` is the Nodefile path, whose frame wins.
 */
export function captureSite(prefer: string | undefined, entry?: (...args: never[]) => unknown): LazySite {
  const previous = Error.stackTraceLimit;
  Error.stackTraceLimit = 6;
  const trace = {} as Error;
  Error.captureStackTrace(trace, entry ?? captureSite);
  Error.stackTraceLimit = previous;
  return new LazySite(trace, prefer);
}

function parseSite(stack: string, prefer: string | undefined): SourceSite | undefined {
  let fallback: SourceSite | undefined;
  for (const line of stack.split('\n')) {
    const match = frame.exec(line.trim());
    if (match === null) continue;
    const [, where = '', row = '0', col = '0'] = match;
    if (where.startsWith(apiDir)) continue;
    const file = where.startsWith('file://') ? fileURLToPath(where) : where;
    const site = { file, line: Number(row), column: Number(col) };
    if (prefer === undefined || file === prefer) return site;
    fallback ??= site;
  }
  return fallback;
}

/** The frame of `error` that lies in `prefer` (the Nodefile), else its first frame. */
export function captureSiteFromError(error: Error, prefer: string): SourceSite | undefined {
  return parseSite(error.stack ?? '', prefer);
}
