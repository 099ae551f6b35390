// The bin as a shell runs it (npx, a PATH lookup): its launcher line starts
// node with one setting (a small young generation), the script turns V8's code
// cache on (bin/nodegraph.js), and the commands tasks run see the environment
// the user gave.

import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { oldNode } from '../support/old-node.ts';
import { cli, collect, Rig, type RunResult } from '../support/rig.ts';

let rig: Rig | undefined;
afterEach(() => rig?.cleanup());

/** The bin executed as a program, with the test's node first on PATH, as npx puts the pinned one. */
function runBin(r: Rig, args: readonly string[]): Promise<RunResult> {
  const child = spawn(cli, args, {
    cwd: r.dir,
    env: { ...process.env, CI: '1', NO_COLOR: '1', NODE_COMPILE_CACHE: undefined, PATH: `${path.dirname(process.execPath)}:${process.env['PATH']}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child);
}

test("run as a program, the engine has the code cache on and the launcher's one flag, and the commands it runs inherit neither", async () => {
  rig = new Rig();
  rig.nodefile(`
  ng.task('engine', {
    outputs: ['engine.json'],
    run: (ctx) => {
      const fs = process.getBuiltinModule('node:fs');
      const cache = process.getBuiltinModule('node:module').getCompileCacheDir?.() ?? null;
      fs.writeFileSync(ctx.cwd + '/engine.json', JSON.stringify({ execArgv: process.execArgv, cache }));
    },
  });
  ng.task('command', { outputs: ['command.txt'], run: { shell: 'echo "\${NODE_COMPILE_CACHE-unset}" > command.txt' } });
`);
  const result = await runBin(rig, ['apply']);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const engine = JSON.parse(rig.read('engine.json')) as { execArgv: string[]; cache: string | null };
  expect(engine.execArgv).toEqual(['--max-semi-space-size=1']);
  expect(engine.cache).toEqual(expect.any(String));
  expect(rig.read('command.txt')).toBe('unset\n');
});

test('arguments reach the CLI as they were given, spaces and all', async () => {
  rig = new Rig();
  rig.nodefile(`ng.task('only', { run: ['true'] });`, 'my graph.ts');
  const result = await runBin(rig, ['plan', '-f', 'my graph.ts']);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  expect(result.stdout).toContain('only');
});

const old = oldNode();
test.skipIf(old === undefined)('an older Node, in a checkout: run it with npx, which brings the pinned Node', () => {
  const result = spawnSync(old!.path, [cli, '--version'], { encoding: 'utf8' });
  expect(result.status).toBe(1);
  expect(result.stderr).toBe(`nodegraph needs Node.js 22.18 or newer (this is ${old!.version}): in this checkout, run it with npx, which uses the pinned Node 24.\n`);
});
