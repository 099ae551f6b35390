// spawnd (native/spawnd.c) and its client in runner.ts, with real processes:
// every result has to be the one a direct spawn gives.

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { Command } from '../../src/nodefile/types.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import { spawnCommand } from '../../src/execute/spawn.ts';
import { SPAWND, Spawnd } from '../../src/execute/spawnd.ts';
import type { RunOptions } from '../../src/process-runner.ts';

let dir: string;
const servers: Spawnd[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-runner-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

/** Waits (without a deadline of its own: the test's timeout is one) until the process is gone. */
async function gone(pid: number): Promise<void> {
  while (alive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** Waits until a file has content (a child wrote its pid). */
async function written(file: string): Promise<string> {
  while (!existsSync(file) || readFileSync(file, 'utf8') === '') await new Promise((resolve) => setTimeout(resolve, 20));
  return readFileSync(file, 'utf8').trim();
}
/** Runs a script in a Node process of its own: the engine's side, to see what becomes of it and its spawnd. */
function engine(script: string): { child: ReturnType<typeof spawn>; lines: string[]; exited: Promise<number | null> } {
  const file = path.join(dir, `engine-${Math.random().toString(36).slice(2)}.ts`);
  const runner = new URL('../../src/execute/spawnd.ts', import.meta.url).href;
  writeFileSync(file, `import { Spawnd } from ${JSON.stringify(runner)};\n${script}`);
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  child.stdout!.setEncoding('utf8').on('data', (text: string) => lines.push(...text.split('\n').filter(Boolean)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited };
}

async function line(lines: string[], n: number): Promise<string> {
  while (lines.length <= n) await new Promise((resolve) => setTimeout(resolve, 20));
  return lines[n]!;
}

// spawnd is built by `npm ci` (scripts/build-spawnd.mjs): its absence fails here rather than skipping.
test('npm ci built spawnd, and a Spawnd made without options starts it', async () => {
  expect(existsSync(SPAWND)).toBe(true);
  const s = new Spawnd();
  servers.push(s);
  expect(await s.ready()).toBe(true);
  expect((await s.run({ shell: 'echo $PPID' }, { cwd: dir })).stdout).toBe(`${s.pid}\n`);
});

describe('spawnd', () => {
  /** A spawnd that is up before the test's first command. */
  async function server(options: { killAfterMs?: number; heldMs?: number } = {}): Promise<Spawnd> {
    const s = new Spawnd(options);
    servers.push(s);
    expect(await s.ready()).toBe(true);
    return s;
  }

  test('commands give the same results through spawnd as spawned directly', async () => {
    const s = await server();
    const options: RunOptions = { cwd: dir, env: { NODEGRAPH_TEST_ADDED: 'added' } };
    const commands: Command[] = [
      ['true'],
      ['false'],
      ['sh', '-c', 'exit 3'],
      { shell: 'echo out; echo err >&2; exit 7' },
      { shell: 'kill -9 $$' },
      { shell: 'kill -TERM $$' },
      ['nodegraph-no-such-program'],
      [path.join(dir, 'no-such-dir', 'prog')],
      ['sh', '-c', 'pwd; printf %s "$NODEGRAPH_TEST_ADDED"'],
      ['printf', '%s', "quotes ' and \" and\nnewlines and \u00e9\u{1F600}"],
    ];
    for (const command of commands) {
      const direct = await spawnCommand(command, options, undefined, true);
      expect(await s.run(command, options)).toEqual(direct);
    }
    expect(s.pid).toBeDefined();
  });

  // fincore (util-linux) says how much of a file is in the page cache; dd's nocache drops one file's pages.
  const resident = (file: string): number => Number(execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', file], { encoding: 'utf8' }).trim());
  test('read-ahead has spawnd bring regular files into the page cache, and only those', async () => {
    const s = await server();
    const files = Array.from({ length: 40 }, (_, i) => path.join(dir, `ahead-${i}`));
    for (const file of files) writeFileSync(file, Buffer.alloc(64 * 1024, 7));
    execFileSync('sync');
    for (const file of files) execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
    const dropped = files.filter((f) => resident(f) === 0).length;
    // Most were dropped (a page another reader holds may stay): what follows has something to show.
    expect(dropped).toBeGreaterThan(30);
    const fifo = path.join(dir, `fifo`);
    execFileSync('mkfifo', [fifo]);
    // A fifo without a writer, an endless device, a folder and a missing path pass by; a NUL refuses the request.
    expect(s.readAhead([path.join(dir, 'a\0b')])).toBe(false);
    expect(s.readAhead([fifo, '/dev/zero', dir, path.join(dir, 'missing'), ...files])).toBe(true);
    // Requests are taken in order: once a command after it has run, the read-ahead was asked for.
    expect((await s.run(['true'], { cwd: dir })).exitCode).toBe(0);
    // The kernel reads ahead in its own time: waited for, up to a deadline a busy machine meets.
    let cached = 0;
    for (let waited = 0; waited < 30_000; waited += 50) {
      cached = files.filter((f) => resident(f) === 64 * 1024).length;
      if (cached === files.length) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(cached).toBe(files.length);
  });

  test('a program name is looked up in the PATH the command is given, as a direct spawn does', async () => {
    const s = await server();
    const bin = path.join(dir, `bin`);
    const other = path.join(dir, `other`);
    execFileSync('mkdir', ['-p', bin, other, path.join(bin, 'a-folder')]);
    writeFileSync(path.join(bin, 'nodegraph-test-prog'), '#!/bin/sh\necho "found in bin: $*"\n', { mode: 0o755 });
    // Not executable where it is first found: the search goes on, and says EACCES only if nothing else is found.
    writeFileSync(path.join(other, 'nodegraph-test-prog'), 'not a program\n', { mode: 0o644 });
    writeFileSync(path.join(other, 'nodegraph-test-only-here'), 'not a program\n', { mode: 0o644 });
    const cases: [Command, RunOptions][] = [
      [['nodegraph-test-prog', 'x y'], { cwd: dir, env: { PATH: `${other}:${bin}:/usr/bin:/bin` } }],
      [['nodegraph-test-only-here'], { cwd: dir, env: { PATH: `${other}:/usr/bin:/bin` } }],
      [['nodegraph-test-prog'], { cwd: dir, env: { PATH: '/usr/bin:/bin' } }],
      [['a-folder'], { cwd: dir, env: { PATH: bin } }],
      // A relative folder of PATH is taken from the command's cwd.
      [['nodegraph-test-prog'], { cwd: dir, env: { PATH: `bin` } }],
      [['./nodegraph-test-prog'], { cwd: bin }],
    ];
    for (const [command, options] of cases) {
      const direct = await spawnCommand(command, options);
      expect(await s.run(command, options), JSON.stringify([command, options.env])).toEqual(direct);
    }
    expect((await s.run(['nodegraph-test-prog', 'x y'], cases[0]![1])).stdout).toBe('found in bin: x y\n');
  });

  test('a program without a #! line is run by the shell, by name or by path, as a direct spawn runs it', async () => {
    const s = await server();
    const bin = path.join(dir, `plain`);
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(path.join(bin, 'nodegraph-test-plain'), 'echo "plain script: $0 $*"\nexit 6\n', { mode: 0o755 });
    const cases: [Command, RunOptions][] = [
      [['nodegraph-test-plain', 'a b'], { cwd: dir, env: { PATH: `${bin}:/usr/bin:/bin` } }],
      [[path.join(bin, 'nodegraph-test-plain'), 'c'], { cwd: dir }],
    ];
    for (const [command, options] of cases) {
      const direct = await spawnCommand(command, options);
      expect(direct).toMatchObject({ exitCode: 6 });
      expect(await s.run(command, options)).toEqual(direct);
    }
  });

  test('exit codes, death by a signal and a program that is not there', async () => {
    const s = await server();
    const ok = await s.run(['true'], { cwd: dir });
    expect(ok).toMatchObject({ ok: true, exitCode: 0, canceled: false, failure: undefined, output: '' });
    const three = await s.run(['sh', '-c', 'exit 3'], { cwd: dir });
    expect(three).toMatchObject({ ok: false, exitCode: 3, canceled: false, failure: 'exited with code 3' });
    const killed = await s.run({ shell: 'echo before; kill -KILL $$' }, { cwd: dir });
    expect(killed).toMatchObject({ ok: false, exitCode: null, canceled: false, failure: 'killed by SIGKILL', output: 'before\n' });
    const missing = await s.run(['nodegraph-no-such-program', 'arg'], { cwd: dir });
    expect(missing.ok).toBe(false);
    expect(missing.failure).toBe('nodegraph-no-such-program is not found on PATH (spawn nodegraph-no-such-program ENOENT)');
    expect(missing.command).toBe('nodegraph-no-such-program arg');
    // What spawn itself refuses is thrown, as spawnCommand throws it.
    await expect(s.run(['nul\0byte'], { cwd: dir })).rejects.toThrow(/null bytes/);
  });

  test('cwd, added variables and the inherited environment reach the command, later changes to it too', async () => {
    process.env['NODEGRAPH_TEST_INHERITED'] = 'inherited';
    try {
      const s = await server();
      const sub = path.join(dir, 'sub dir');
      execFileSync('mkdir', ['-p', sub]);
      const r = await s.run({ shell: 'pwd; echo "$NODEGRAPH_TEST_ADDED"; echo "$NODEGRAPH_TEST_INHERITED"' }, { cwd: sub, env: { NODEGRAPH_TEST_ADDED: 'a b' } });
      expect(r.stdout).toBe(`${sub}\na b\ninherited\n`);
      // Changed while spawnd was idle: the next command sees it.
      process.env['NODEGRAPH_TEST_INHERITED'] = 'changed';
      const again = await s.run({ shell: 'echo "$NODEGRAPH_TEST_INHERITED"; echo "${NODEGRAPH_TEST_ADDED-unset}"' }, { cwd: sub });
      expect(again.stdout).toBe('changed\nunset\n');
      // Added variables override inherited ones.
      const over = await s.run({ shell: 'echo "$NODEGRAPH_TEST_INHERITED"' }, { cwd: sub, env: { NODEGRAPH_TEST_INHERITED: 'over' } });
      expect(over.stdout).toBe('over\n');
      const missingCwd = await s.run(['true'], { cwd: path.join(dir, 'not-there') });
      expect(missingCwd).toMatchObject({ ok: false, failure: expect.stringMatching(/ENOENT/) });
    } finally {
      delete process.env['NODEGRAPH_TEST_INHERITED'];
    }
  });

  test("a task's stdout and stderr are one pipe: its output in the order it was written, through spawnd and spawned directly", async () => {
    const s = await server();
    const lines = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? `err${i}` : `out${i}`));
    const script = lines.map((l) => (l.startsWith('err') ? `echo ${l} >&2` : `echo ${l}`)).join('; ');
    const whole = lines.map((l) => `${l}\n`).join('');
    for (const r of [await s.run({ shell: script }, { cwd: dir }), await spawnCommand({ shell: script }, { cwd: dir }, undefined, true)]) {
      expect(r).toMatchObject({ stdout: whole, stderr: '', output: whole });
    }
    // Any other command (a node helper's, ctx.exec's) has them apart, for a caller that reads stdout alone.
    const apart = await spawnCommand({ shell: 'echo out; echo err >&2' }, { cwd: dir });
    expect(apart).toMatchObject({ stdout: 'out\n', stderr: 'err\n' });
  });

  test('several MB of arbitrary bytes decode as a direct spawn decodes them', async () => {
    const s = await server();
    const bytes = Buffer.alloc(5_000_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919 + (i >> 8)) & 0xff;
    const file = path.join(dir, 'binary');
    writeFileSync(file, bytes);
    const r = await s.run(['cat', file], { cwd: dir });
    expect(r.ok).toBe(true);
    expect(r.stdout === bytes.toString()).toBe(true);
    expect(r.output === r.stdout).toBe(true);
    // Both streams large: every byte of each, in the order written.
    const both = await s.run({ shell: 'head -c 3000000 /dev/zero | tr "\\0" a; head -c 2000000 /dev/zero | tr "\\0" b >&2' }, { cwd: dir });
    expect(both.stdout === `${'a'.repeat(3_000_000)}${'b'.repeat(2_000_000)}`).toBe(true);
    expect(both.stderr).toBe('');
  });

  test('an abort stops the command with SIGTERM, and with SIGKILL one that ignores SIGTERM', async () => {
    const s = await server({ killAfterMs: 200 });
    const polite = new AbortController();
    const pidFile = path.join(dir, `polite.pid`);
    const running = s.run({ shell: `echo $$ > '${pidFile}'; exec sleep 60` }, { cwd: dir, signal: polite.signal });
    const pid = Number(await written(pidFile));
    polite.abort();
    expect(await running).toMatchObject({ ok: false, canceled: true, failure: 'canceled', exitCode: null });
    await gone(pid);

    const stubborn = new AbortController();
    const stubbornPid = path.join(dir, `stubborn.pid`);
    // An ignored signal stays ignored across exec: sleep ignores SIGTERM.
    const ignoring = s.run({ shell: `trap '' TERM; echo $$ > '${stubbornPid}'; exec sleep 60` }, { cwd: dir, signal: stubborn.signal });
    const pid2 = Number(await written(stubbornPid));
    stubborn.abort();
    expect(await ignoring).toMatchObject({ ok: false, canceled: true, failure: 'canceled', exitCode: null });
    await gone(pid2);

    const already = new AbortController();
    already.abort();
    expect(await s.run(['sleep', '60'], { cwd: dir, signal: already.signal })).toMatchObject({ canceled: true, failure: 'canceled' });
    // And a command that finishes before any abort is not canceled by a later one.
    const late = new AbortController();
    expect(await s.run(['true'], { cwd: dir, signal: late.signal })).toMatchObject({ ok: true, canceled: false });
    late.abort();
  });

  test('an abort reaches a job the command started after the command itself has exited', async () => {
    const s = await server({ killAfterMs: 200, heldMs: 600_000 });
    const abort = new AbortController();
    const pidFile = path.join(dir, `job.pid`);
    // The shell exits at once; the sleep it left holds the output open, so the command is not done (for heldMs).
    const running = s.run({ shell: `sleep 60 & echo $! > '${pidFile}'` }, { cwd: dir, signal: abort.signal });
    const job = Number(await written(pidFile));
    expect(alive(job)).toBe(true);
    abort.abort();
    expect(await running).toMatchObject({ canceled: true, failure: 'canceled' });
    await gone(job);
  });

  test('a job holding the output once the command has exited is left to run, its output closed: the command is done', async () => {
    const s = await server({ heldMs: 50 });
    for (const run of [(c: Command) => s.run(c, { cwd: dir }), (c: Command) => spawnCommand(c, { cwd: dir }, undefined, true, 50)]) {
      const pidFile = path.join(dir, `held-${Math.random().toString(36).slice(2)}.pid`);
      const result = await run({ shell: `sleep 60 & echo $! > '${pidFile}'; echo started; exit 3` });
      expect(result).toMatchObject({ ok: false, exitCode: 3, failure: 'exited with code 3', output: 'started\n', held: true });
      const job = Number(readFileSync(pidFile, 'utf8'));
      expect(alive(job)).toBe(true);
      process.kill(job, 'SIGKILL');
    }
    // Output that ends with the command is not held.
    expect(await s.run({ shell: 'echo quick' }, { cwd: dir })).not.toHaveProperty('held');
  });

  test('spawnd ignores SIGINT, SIGTERM and SIGHUP: the engine decides what stops', async () => {
    const s = await server();
    process.kill(s.pid!, 'SIGINT');
    process.kill(s.pid!, 'SIGTERM');
    process.kill(s.pid!, 'SIGHUP');
    const r = await s.run({ shell: 'echo still' }, { cwd: dir });
    expect(r).toMatchObject({ ok: true, stdout: 'still\n' });
    expect(alive(s.pid!)).toBe(true);
  });

  test('when spawnd dies, commands in flight fail and later ones run directly', async () => {
    const s = await server();
    const pidFile = path.join(dir, `orphan.pid`);
    const inFlight = s.run({ shell: `echo $$ > '${pidFile}'; exec sleep 60` }, { cwd: dir });
    const orphan = Number(await written(pidFile));
    const serverPid = s.pid!;
    process.kill(serverPid, 'SIGKILL');
    const failed = await inFlight;
    expect(failed).toMatchObject({ ok: false, canceled: false, exitCode: null, failure: 'spawnd killed by SIGKILL' });
    process.kill(orphan, 'SIGKILL');
    expect(await s.ready()).toBe(false);
    const after = await s.run({ shell: 'echo $PPID' }, { cwd: dir });
    expect(after).toMatchObject({ ok: true, stdout: `${process.pid}\n` });
  });

  test('a spawnd that cannot start leaves every command to direct spawns, the first one too', async () => {
    const s = new Spawnd({ program: new URL('file:///nonexistent/spawnd') });
    servers.push(s);
    const first = await s.run({ shell: 'echo $PPID' }, { cwd: dir });
    expect(first).toMatchObject({ ok: true, stdout: `${process.pid}\n` });
    expect(await s.ready()).toBe(false);
    expect(await s.run(['sh', '-c', 'exit 4'], { cwd: dir })).toMatchObject({ ok: false, failure: 'exited with code 4' });
    expect(s.readAhead([dir])).toBe(false);
  });

  test('a spawnd built from another version of its source is not used: commands run directly', async () => {
    const fake = path.join(dir, 'old-spawnd');
    writeFileSync(fake, '#!/bin/sh\necho "ready 0"\nexec cat >/dev/null\n', { mode: 0o755 });
    const s = new Spawnd({ program: pathToFileURL(fake) });
    servers.push(s);
    expect(await s.run({ shell: 'echo $PPID' }, { cwd: dir })).toMatchObject({ ok: true, stdout: `${process.pid}\n` });
    expect(await s.ready()).toBe(false);
  });

  test('many commands at once', async () => {
    const s = await server();
    const runner = new LocalRunner({ spawnd: s });
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => runner.runTask(['sh', '-c', 'echo "$0 $PPID"; [ $(($0 % 7)) -ne 0 ]', String(i)], { cwd: dir })),
    );
    results.forEach((r, i) => {
      expect(r.stdout).toBe(`${i} ${s.pid}\n`);
      expect(r.ok).toBe(i % 7 !== 0);
    });
  });

  test('an idle spawnd keeps no engine alive, and goes when the engine goes', async () => {
    const e = engine(`
      const s = new Spawnd();
      console.log(await s.ready() ? s.pid : 'not ready');
      const r = await s.run({ shell: 'echo $PPID' }, { cwd: '/' });
      console.log(r.stdout.trim());
    `);
    expect(await e.exited).toBe(0); // would never come if spawnd held the event loop
    const pid = Number(e.lines[0]);
    expect(e.lines[1]).toBe(String(pid));
    await gone(pid);
  });

  test('a spawnd whose engine was killed exits', async () => {
    const pidFile = path.join(dir, `engine-child.pid`);
    const e = engine(`
      const s = new Spawnd();
      console.log(await s.ready() ? s.pid : 'not ready');
      await s.run({ shell: ${JSON.stringify(`echo $$ > '${pidFile}'; exec sleep 60`)} }, { cwd: '/' });
    `);
    const pid = Number(await line(e.lines, 0));
    const child = Number(await written(pidFile));
    expect(alive(pid)).toBe(true);
    e.child.kill('SIGKILL');
    await e.exited;
    await gone(pid);
    process.kill(child, 'SIGKILL'); // left to run, as a direct spawn's would be
  });
});

test('through execa too (a command given input, or whose output is ignored), an abort stops what the command started', async () => {
  const runner = new LocalRunner({ spawnd: false });
  for (const extra of [{ input: 'x' }, { output: 'ignore' as const }]) {
    const abort = new AbortController();
    const pidFile = path.join(dir, `child-${Object.keys(extra)[0]}.pid`);
    // The shell starts a sleep of its own and waits for it: signalling the shell alone would leave the sleep.
    const running = runner.run({ shell: `sleep 60 & echo $! > '${pidFile}'; wait` }, { cwd: dir, signal: abort.signal, ...extra });
    const sleeper = Number(await written(pidFile));
    expect(alive(sleeper)).toBe(true);
    abort.abort();
    expect(await running).toMatchObject({ ok: false, canceled: true, failure: 'canceled' });
    await gone(sleeper);
  }
  const already = new AbortController();
  already.abort();
  expect(await runner.run(['sleep', '60'], { cwd: dir, signal: already.signal, input: '' })).toMatchObject({ canceled: true, failure: 'canceled' });
});

test('run() reports alike whether it takes the lean path or execa', async () => {
  // Without input it spawns directly; with input (even none to speak of) it goes through execa.
  const runner = new LocalRunner({ spawnd: false });
  const options: RunOptions = { cwd: dir, env: { NODEGRAPH_TEST_ADDED: 'added' } };
  const commands: Command[] = [
    ['true'],
    ['sh', '-c', 'echo out; echo err >&2; exit 5'],
    { shell: 'echo before; kill -TERM $$' },
    ['nodegraph-no-such-program', 'arg'],
    ['sh', '-c', 'pwd; printf %s "$NODEGRAPH_TEST_ADDED"'],
    ['printf', '%s', "quotes ' and \" and\nnewlines and \u00e9\u{1F600}"],
  ];
  for (const command of commands) {
    const lean = await runner.run(command, options);
    const viaExeca = await runner.run(command, { ...options, input: '' });
    // Output order across the two pipes is the one thing two runs may not share.
    const { output: a, ...leanRest } = lean;
    const { output: b, ...execaRest } = viaExeca;
    expect(leanRest).toEqual(execaRest);
    expect([...a].sort().join('')).toBe([...b].sort().join(''));
  }
  // What spawn itself refuses is a failed result on both paths, not a throw.
  const nul = await runner.run(['nul\0byte'], options);
  expect(nul).toMatchObject({ ok: false, exitCode: null });
  expect((await runner.run(['nul\0byte'], { ...options, input: '' })).ok).toBe(false);
});
