// Events as JSON lines, one object per line, for programs. Versioned by
// the `v` field; see README "JSON events".

import type { EngineEvent } from '../events.ts';
import type { Reporter } from './reporter.ts';

export const JSON_EVENTS_VERSION = 1;

export function jsonReporter(write: (line: string) => void): Reporter {
  return {
    sink: (event: EngineEvent) => write(`${JSON.stringify({ v: JSON_EVENTS_VERSION, ...event })}\n`),
    close: () => {},
  };
}
