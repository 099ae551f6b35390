// A reporter turns engine events into output; which one a command gets
// depends on the terminal and the flags.

import type { EventSink } from '../events.ts';

export interface Reporter {
  readonly sink: EventSink;
  /** Flushes and restores the terminal; called once at the end. */
  close(): void | Promise<void>;
}
