// Events as JSON lines, one object per line, for programs: each with the
// version `v`, its `type` and the ISO time it was written. Their schema is
// schemas/events.schema.json; see README "JSON".

import type { EngineEvent } from '../events.ts';
import type { Reporter } from './reporter.ts';

export const JSON_EVENTS_VERSION = 1;

export function jsonReporter(write: (line: string) => void): Reporter {
  return {
    sink: (event: EngineEvent) => {
      // A running command's last line is for the live view; its whole output is in its task-done.
      if (event.type === 'task-progress') return;
      const { type, ...rest } = event;
      write(`${JSON.stringify({ v: JSON_EVENTS_VERSION, type, time: new Date().toISOString(), ...rest })}\n`);
    },
    close: () => {},
  };
}
