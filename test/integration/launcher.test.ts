// The bin as a shell runs it (npx, a PATH lookup): its first lines start node
// with the settings only a process's start can make (bin/nodegraph.js), and
// the commands tasks run see the environment the user gave, not those settings.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { cli, collect, Rig, type RunResult } from '../support/rig.ts';

let rig: Rig | undefined;
afterEach(() => rig?.cleanup());

/** The bin executed as a program, with the test's node first on PATH, as npx puts the pinned one. */
function runBin(r: Rig, args: readonly string[], env: Record<string, string | undefined>): Promise<RunResult> {
  const child = spawn(cli, args, {
    cwd: r.dir,
    env: { ...process.env, CI: '1', NO_COLOR: '1', MALLOC_ARENA_MAX: undefined, ...env, PATH: `${path.dirname(process.execPath)}:${process.env['PATH']}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child);
}

function graph(r: Rig): void {
  r.nodefile(`
  ng.task('engine', {
    outputs: ['engine.json'],
    run: (ctx) => {
      const fs = process.getBuiltinModule('node:fs');
      // The environment the engine process started with, which glibc read, against what it hands on now.
      const started = fs.readFileSync('/proc/self/environ', 'latin1').split('\\0').filter((v) => v.startsWith('MALLOC_ARENA_MAX='));
      fs.writeFileSync(ctx.cwd + '/engine.json', JSON.stringify({ execArgv: process.execArgv, started, now: process.env.MALLOC_ARENA_MAX ?? null }));
    },
  });
  ng.task('command', { outputs: ['command.txt'], run: { shell: 'echo "\${MALLOC_ARENA_MAX-unset} \${NODEGRAPH_SET_ARENA-unset}" > command.txt' } });
`);
}

test('run as a program, the engine starts with one V8 helper thread and one malloc arena, and the commands it runs do not inherit the arena setting', async () => {
  rig = new Rig();
  graph(rig);
  const result = await runBin(rig, ['apply'], {});
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const engine = JSON.parse(rig.read('engine.json')) as { execArgv: string[]; started: string[]; now: string | null };
  expect(engine.execArgv).toContain('--v8-pool-size=1');
  expect(engine.started).toEqual(['MALLOC_ARENA_MAX=1']);
  expect(engine.now).toBeNull();
  expect(rig.read('command.txt')).toBe('unset unset\n');
});

test("a user's own MALLOC_ARENA_MAX is kept, for the engine and for the commands", async () => {
  rig = new Rig();
  graph(rig);
  const result = await runBin(rig, ['apply'], { MALLOC_ARENA_MAX: '3' });
  expect(result.code).toBe(0);
  const engine = JSON.parse(rig.read('engine.json')) as { started: string[]; now: string | null };
  expect(engine.started).toEqual(['MALLOC_ARENA_MAX=3']);
  expect(engine.now).toBe('3');
  expect(rig.read('command.txt')).toBe('3 unset\n');
});

test('arguments reach the CLI as they were given, spaces and all', async () => {
  rig = new Rig();
  rig.nodefile(`ng.task('only', { run: ['true'] });`, 'my graph.ts');
  const result = await runBin(rig, ['plan', '-f', 'my graph.ts'], {});
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  expect(result.stdout).toContain('only');
});
