// Where a declaration was made. Capturing a stack is cheap; formatting it is
// not, so the site is captured as an Error and only parsed when a diagnostic
// needs it (a 50,000-task graph pays for the capture alone).

import { fileURLToPath } from 'node:url';
import type { SourceSite } from './types.ts';

const apiDir = new URL('.', import.meta.url).href;
const frame = /\(?((?:file:\/\/|\/)[^()\s]+?):(\d+):(\d+)\)?$/;

export class LazySite {
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

/** Captures the caller's stack; `prefer` is the Nodefile path, whose frame wins when present. */
export function captureSite(prefer: string | undefined): LazySite {
  const previous = Error.stackTraceLimit;
  Error.stackTraceLimit = 12;
  const trace = new Error();
  Error.stackTraceLimit = previous;
  return new LazySite(trace, prefer);
}

function parseSite(stack: string, prefer: string | undefined): SourceSite | undefined {
  let fallback: SourceSite | undefined;
  for (const line of stack.split('\n').slice(1)) {
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
