#!/bin/sh
':' //; [ -n "${MALLOC_ARENA_MAX+set}" ] || export MALLOC_ARENA_MAX=1 NODEGRAPH_SET_ARENA=1; exec node --v8-pool-size=1 "$0" "$@"
// Runs the compiled CLI in an installed package, the TypeScript sources in a checkout.
//
// The line above is the launcher: /bin/sh runs it (to JavaScript it is a string and a
// comment) and replaces itself with node, given two settings that only a process's start
// can make: one V8 helper thread instead of four, and one malloc arena for every thread.
// With V8's default four threads, each with an arena of its own, a 50,000-task build held
// about 8 MiB more, and a short run took no less time (BENCHMARKS.md, the fourteenth sitting).
// Run as `node bin/nodegraph.js`, nodegraph works the same without them.
// MALLOC_ARENA_MAX is glibc's, read as the process starts; it is set only if the user
// had not, and taken out again at once, so that the commands tasks run do not inherit it.
if (process.env.NODEGRAPH_SET_ARENA === '1') {
  delete process.env.NODEGRAPH_SET_ARENA;
  delete process.env.MALLOC_ARENA_MAX;
}
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `nodegraph needs Node.js 22.18 or newer (this is ${process.versions.node}); in a checkout, run it with npx, which uses the pinned Node 24.\n`,
  );
  process.exit(1);
}
// Built-ins by process.getBuiltinModule, not `import`: an ES import of node:fs builds its
// whole namespace, whose `promises` getter loads fs/promises, readline and streams (34 of
// Node's own modules that a no-op never uses).
const { existsSync } = process.getBuiltinModule('node:fs');
// V8's code cache for our modules and dependencies: start-up is most of a no-op's cost.
process.getBuiltinModule('node:module').enableCompileCache?.();
const dist = new URL('../dist/lib/main.js', import.meta.url);
const { runCli } = await import(existsSync(dist) ? dist.href : new URL('../src/cli/main.ts', import.meta.url).href);
await runCli();
