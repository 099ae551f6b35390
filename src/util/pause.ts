// Waiting without the event loop, for the synchronous lock and cleanup code.

/** Blocks this thread for `ms` milliseconds. */
export function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
