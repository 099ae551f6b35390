#!/usr/bin/env node
// Runs the compiled CLI in an installed package, the TypeScript sources in a checkout.
import { existsSync } from 'node:fs';
import module from 'node:module';

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `nodegraph needs Node.js 22.18 or newer (this is ${process.versions.node}); in a checkout, run it with npx, which uses the pinned Node 24.\n`,
  );
  process.exit(1);
}
// V8's code cache for our modules and dependencies: start-up is most of a no-op's cost.
module.enableCompileCache?.();
const dist = new URL('../dist/lib/main.js', import.meta.url);
const { runCli } = await import(existsSync(dist) ? dist.href : new URL('../src/cli/main.ts', import.meta.url).href);
await runCli();
