// A full garbage collection on demand, for the one moment the engine knows a
// large part of its heap just died: the state journal's bytes and text, once
// decoded (see openSession in engine.ts).
//
// Node exposes no collector call without --expose-gc at start-up. That flag,
// set later, still applies to contexts created afterwards: a new context made
// through node:vm gets `gc`, and it collects the one heap all contexts share.

let gc: (() => void) | undefined;

export function collectGarbage(): void {
  if (gc === undefined) {
    process.getBuiltinModule('node:v8').setFlagsFromString('--expose-gc');
    gc = process.getBuiltinModule('node:vm').runInNewContext('gc') as () => void;
  }
  gc();
}
