// Events as JSON lines, one object per line, for programs: each with the
// version `v`, its `type` and the ISO time it was written. Their schema is
// schemas/events.schema.json; see README "JSON".

import type { EngineEvent } from '../events.ts';
import { Recap, recapJson } from './recap.ts';
import type { Reporter } from './reporter.ts';

export const JSON_EVENTS_VERSION = 1;

export function jsonReporter(write: (line: string) => void): Reporter {
  const recap = new Recap();
  return {
    sink: (event: EngineEvent) => {
      recap.see(event);
      // A running command's last line is for the live view; its whole output is in its task-done.
      if (event.type === 'task-progress') return;
      const { type, ...rest } = event;
      // The summary repeats what failed and what did not run because of it, as the terminal's recap does.
      if (type === 'summary') Object.assign(rest, recapJson(recap));
      write(`${JSON.stringify({ v: JSON_EVENTS_VERSION, type, time: new Date().toISOString(), ...rest })}\n`);
    },
    close: () => {},
  };
}
