#!/bin/sh
':' //; exec node --max-semi-space-size=1 "$0" "$@"
// Runs the compiled CLI in an installed package, the TypeScript sources in a checkout.
//
// The line above is the launcher: /bin/sh runs it (to JavaScript it is a string and a
// comment) and replaces itself with node, given the one setting only a process's start can
// make: a young generation of at most 1 MiB a semi-space. Nearly everything a run allocates
// lives to its end, so a larger one only copies it more and holds more: the peak of a
// 10,000-leaf no-op and build is about a quarter lower, in the same time (BENCHMARKS.md,
// start-up settings). Run as `node bin/nodegraph.js`, nodegraph works the same without it.
const dist = new URL('../dist/lib/main.js', import.meta.url);
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  // An installed package has its bundle; a checkout has only the sources, and pins a Node of its own.
  const { existsSync } = await import('node:fs');
  const hint = existsSync(dist) ? 'install a newer Node.js (https://nodejs.org)' : 'in this checkout, run it with npx, which uses the pinned Node 24';
  process.stderr.write(`nodegraph needs Node.js 22.18 or newer (this is ${process.versions.node}): ${hint}.\n`);
  process.exit(1);
}
// Built-ins by process.getBuiltinModule, not `import`: an ES import of node:fs builds its
// whole namespace, whose `promises` getter loads fs/promises, readline and streams (34 of
// Node's own modules that a no-op never uses).
const { existsSync } = process.getBuiltinModule('node:fs');
// V8's code cache for our modules, our dependencies and the Nodefile: a one-task no-op
// takes about half as long with it, and peaks 17 MiB lower (BENCHMARKS.md, start-up settings).
process.getBuiltinModule('node:module').enableCompileCache?.();
const { runCli } = await import(existsSync(dist) ? dist.href : new URL('../src/cli/main.ts', import.meta.url).href);
await runCli();
