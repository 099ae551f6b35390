// State is sacred: the lock, Ctrl-C, kill -9, an unwritable state dir.

import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, utimesSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { alive, cli, collect, Rig, until, type RunResult } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
// Children a test could not wait for, ended after it.
const spawned: ChildProcess[] = [];
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => {
  for (const child of spawned.splice(0)) child.kill('SIGKILL');
  rig.cleanup();
});



const ranIds = (stdout: string): string[] =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { type: string; id?: string; outcome?: string })
    .filter((e) => e.type === 'task-done' && e.outcome === 'ran')
    .map((e) => e.id!)
    .sort();

// A SIGTERM sent to nodegraph alone (kill PID, a supervisor, CI) reaches what each
// running command started too, whether spawnd or nodegraph itself started it.
for (const [how, env, signal] of [
  ['started by spawnd', {}, 'SIGTERM'],
  ['started by the engine', { NODEGRAPH_SPAWN_SERVER: 'off' }, 'SIGTERM'],
  // A dropped SSH session: as make does, the clean stop of Ctrl-C.
  ['started by spawnd', {}, 'SIGHUP'],
] as const) {
  test(`a ${signal} to nodegraph alone stops a command's own children (${how}) and exits 130 at once`, async () => {
    // The shell waits for its child; killing the shell alone would leave the sleep, holding the output pipe.
    rig.nodefile(`ng.task('long', { outputs: ['out/long'], run: { shell: 'sleep 120 & echo $! > out/pid; wait' } });`);
    const child = rig.spawn(['apply', '-j', '4'], env);
    const done = collect(child);
    await until(() => existsSync(rig.path('out/pid')) && readFileSync(rig.path('out/pid'), 'utf8').endsWith('\n'));
    const sleeper = Number(readFileSync(rig.path('out/pid'), 'utf8'));
    expect(alive(sleeper)).toBe(true);
    child.kill(signal);
    // Before the sleep would have ended by itself (and let go of the output pipe).
    const result = await done;
    expect(result.code).toBe(130);
    expect(alive(sleeper)).toBe(false);
    await until(() => !alive(sleeper), 10_000);
    expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
  }, 30_000);
}

test('output nobody reads any more (| head) does not end the run: it finishes, records everything, lets go of the lock', async () => {
  rig.nodefile(`for (let i = 0; i < 20; i++) ng.task('t' + i, { outputs: ['out/' + i], run: ['sh', '-c', 'sleep 0.05; echo said; touch out/' + i] });`);
  const child = rig.spawn(['apply', '-j', '2']);
  const done = collect(child);
  // Read the first line, then close the pipe, as head -n 1 does.
  await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
  child.stdout!.destroy();
  expect((await done).code).toBe(0);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
  expect((await rig.run(['plan'])).stdout).toBe('No changes: 20 tasks up to date.\n');
});

test('stdout a pipe that another process made non-blocking, and full: no output is lost (cli/output.ts)', async () => {
  rig.nodefile(`for (let i = 0; i < 2500; i++) ng.task('task-with-a-long-name-to-fill-the-pipe-' + i, { outputs: ['out/' + i], run: ['touch', 'out/' + i] });`);
  const expected = (await rig.run(['plan', '-v'])).stdout;
  expect(Buffer.byteLength(expected)).toBeGreaterThan(2 * 65536); // more than a pipe holds
  // perl sets O_NONBLOCK on the pipe's write end, then becomes nodegraph; the reader starts late.
  const setNonBlocking = 'use Fcntl; fcntl(STDOUT, F_SETFL, fcntl(STDOUT, F_GETFL, 0) | O_NONBLOCK) or die; exec @ARGV or die';
  const script = `perl -e '${setNonBlocking}' "$@" | (sleep 1; cat)`;
  const got = spawnSync('sh', ['-c', script, 'sh', process.execPath, cli, 'plan', '-v'], { cwd: rig.dir, encoding: 'utf8', env: { ...process.env, CI: '1', NO_COLOR: '1' } });
  expect(got.status).toBe(0);
  expect(got.stdout.length).toBe(expected.length);
  expect(got.stdout).toBe(expected);
});

test('an empty lock left by a power loss (written before this boot) does not lock the state out: apply removes it and says so', async () => {
  rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
  rig.write('.nodegraph/lock', '');
  const beforeBoot = new Date('2001-02-03T04:05:06Z');
  utimesSync(rig.path('.nodegraph/lock'), beforeBoot, beforeBoot);
  const r = await rig.run(['apply']);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain('warning: removed an unreadable state lock written at 2001-02-03T04:05:06.000Z, before this machine booted (the lock file is empty: "")');
  expect(existsSync(rig.path('out/t'))).toBe(true);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
});

test('a full disk mid-apply: the run stops, says what ran and why it stopped, and the state it wrote loads', () => {
  rig.nodefile(`for (let i = 0; i < 60; i++) ng.task('t' + i, { outputs: ['out/' + i], run: ['touch', 'out/' + i] });`);
  // A 200 KiB file system of its own (a tmpfs in a mount namespace, so no root is needed), filled
  // but for 20 KB: the commands write nothing, the journal fills it.
  const script = `
    mount -t tmpfs -o size=200k tmpfs disk && cp Nodefile.ts disk/ && cd disk && head -c 180000 /dev/zero > filler || exit 99
    "$@" apply -j 1; echo "exit $?"
    rm filler; "$@" plan | grep "^Plan: "`;
  mkdirSync(rig.path('disk'));
  const got = spawnSync('unshare', ['-rm', 'sh', '-c', script, 'sh', process.execPath, cli], { cwd: rig.dir, encoding: 'utf8', env: { ...process.env, CI: '1', NO_COLOR: '1' } });
  expect(got.status).toBe(0);
  const ran = Number(/^Apply: (\d+) ran, 0 failed, (\d+) skipped/m.exec(got.stdout)?.[1]);
  expect(ran).toBeGreaterThan(0);
  expect(ran).toBeLessThan(60);
  expect(got.stdout).toContain('\nexit 1\n');
  expect(got.stderr).toMatch(/^error\[state-dir-unwritable\]: cannot write to the state folder \S+\/disk\/\.nodegraph: state\.jsonl: no space left on device \(ENOSPC\); the run stopped there, and a task whose record was lost is done again next time\n/);
  // What was recorded loads; the task whose record was cut off, and those never started, are to create.
  const plan = /^Plan: (\d+) to create, 0 to update, 0 to destroy; (\d+) unchanged\.$/m.exec(got.stdout.slice(got.stdout.indexOf('\nexit 1\n')));
  expect(plan).not.toBeNull();
  expect(Number(plan![1]) + Number(plan![2])).toBe(60);
  expect(Number(plan![2])).toBeGreaterThanOrEqual(ran - 1);
});

test('a second apply is refused while the first holds the lock, with who holds it', async () => {
  rig.nodefile(`ng.task('slow', { outputs: ['out/slow'], run: { shell: 'sleep 3; touch out/slow' } });`);
  const first = rig.spawn(['apply']);
  const done = collect(first);
  await until(() => existsSync(rig.path('.nodegraph/lock')));
  const second = await rig.run(['apply']);
  expect(second.code).toBe(1);
  expect(second.stderr).toMatch(
    new RegExp(`^error\\[locked\\]: the state is locked by pid ${first.pid} on \\S+ \\(nodegraph apply\\), since \\S+, which is still running: wait for it to end\\n$`),
  );
  expect((await done).code).toBe(0);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
});

test('Ctrl-C kills the running task, records nothing as done, releases the lock, exits 130', async () => {
  rig.nodefile(`
    ng.task('long', { outputs: ['out/long'], run: { shell: 'echo $$ > out/pid; exec sleep 30' } });
    ng.task('quick', { outputs: ['out/quick'], run: ['touch', 'out/quick'] });
  `);
  const child = rig.spawn(['apply', '--json']);
  const done = collect(child);
  let events = '';
  child.stdout?.on('data', (d: Buffer) => (events += d.toString()));
  await until(() => existsSync(rig.path('out/pid')) && readFileSync(rig.path('out/pid'), 'utf8').endsWith('\n'));
  await until(() => events.split('\n').some((line) => line.includes('"type":"task-done"') && line.includes('"id":"quick","outcome":"ran"')));
  const sleeper = Number(readFileSync(rig.path('out/pid'), 'utf8'));
  child.kill('SIGINT');
  const result = await done;
  expect(result.code).toBe(130);
  await until(() => !alive(sleeper), 10_000);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
  const plan = await rig.run(['plan']);
  // quick finished and was recorded; long was interrupted and is not trusted.
  expect(plan.stdout).toMatch(/~ long\s+update\s+last run was canceled\n/);
  expect(plan.stdout).not.toContain('quick');
});

test('Ctrl-C while the checks run: plan, status and apply say the run was interrupted, show no drift the cut-short check did not find, exit 130', async () => {
  // The check is slow only once `slow` exists, and then says it started (`checking`) first.
  rig.nodefile(`ng.task('svc', { run: ['true'], check: { shell: 'if [ -e slow ]; then touch checking; sleep 30; fi' } });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.write('slow', '');
  for (const args of [['plan'], ['plan', '--json', '--out', 'saved.plan'], ['status'], ['apply', '--metrics-file', 'apply.prom']]) {
    rmSync(rig.path('checking'), { force: true });
    const child = rig.spawn(args);
    const done = collect(child);
    await until(() => existsSync(rig.path('checking')));
    child.kill('SIGINT');
    const result = await done;
    expect(result.code, args.join(' ')).toBe(130);
    expect(result.stderr, args.join(' ')).toContain('error[interrupted]: interrupted while checking what is in place: nothing was changed\n');
    expect(result.stdout, args.join(' ')).not.toMatch(/drift|check failed|"type":"plan"|"entries"/);
  }
  expect(existsSync(rig.path('saved.plan'))).toBe(false);
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
  // An interrupted apply counts as canceled, not as one that could not run.
  expect(rig.read('apply.prom')).toContain('nodegraph_last_run_outcome{command="apply",outcome="canceled"} 1\n');
}, 60_000);

/** Whether the process `child` has `file` open. */
const opens = (child: ChildProcess, file: string): boolean => {
  try {
    return readdirSync(`/proc/${child.pid}/fd`).some((fd) => readlinkSync(`/proc/${child.pid}/fd/${fd}`) === file);
  } catch {
    return false;
  }
};

/** Runs apply and sends it SIGINT once it has `file` open, reading it: it must end with 130. */
async function interruptedReading(file: string): Promise<RunResult> {
  const child = rig.spawn(['apply']);
  spawned.push(child);
  const done = collect(child);
  await until(() => opens(child, file));
  child.kill('SIGINT');
  const result = await done;
  expect(result.code).toBe(130);
  return result;
}

// A terabyte that takes no disk (a sparse file): read whole, it would take many minutes.
const TERABYTE = '1T';
const small = `ng.task('small', { outputs: ['out/small'], run: ['touch', 'out/small'] });`;
for (const { what, first, then, large } of [
  { what: 'a file input', first: small, then: `ng.task('boot', { inputs: { image: ng.file('data/big.img') }, run: ['true'] });`, large: 'data/big.img' },
  { what: 'a file in a tree input', first: small, then: `ng.task('boot', { inputs: { images: ng.tree('data') }, run: ['true'] });`, large: 'data/big.img' },
  { what: 'a file a glob input matches', first: small, then: `ng.task('boot', { inputs: { images: ng.glob('data/*.img') }, run: ['true'] });`, large: 'data/big.img' },
  // Its task recorded, the output made large since: looked at before anything runs.
  { what: 'a recorded output', first: `ng.task('image', { outputs: ['out/big.img'], run: ['truncate', '-s', '1M', 'out/big.img'] });`, then: '', large: 'out/big.img' },
]) {
  test(`Ctrl-C while a large file (${what}) is hashed ends the read at once: interrupted, the state as it was, exit 130`, { timeout: 180_000 }, async () => {
    rig.write('data/small.txt', 'small\n');
    rig.nodefile(first);
    expect((await rig.run(['apply'])).code).toBe(0);
    const state = (): Record<string, string> =>
      Object.fromEntries(readdirSync(rig.path('.nodegraph'), { recursive: true, encoding: 'utf8' }).sort().map((f) => [f, statSync(rig.path('.nodegraph', f)).isFile() ? readFileSync(rig.path('.nodegraph', f), 'latin1') : '']));
    const before = state();
    const image = rig.path(large);
    expect(spawnSync('truncate', ['-s', TERABYTE, image]).status).toBe(0);
    rig.nodefile(`${first}\n${then}`);
    const result = await interruptedReading(image);
    expect(result.stderr).toContain('error[interrupted]: interrupted while checking what is in place: nothing was changed\n');
    expect(state()).toEqual(before);
  });
}

test('a first apply interrupted while it hashes leaves no state folder: plan and status read it as never applied', { timeout: 180_000 }, async () => {
  const image = rig.path('big.img');
  expect(spawnSync('truncate', ['-s', '1T', image]).status).toBe(0);
  rig.nodefile(`ng.task('boot', { inputs: { image: ng.file('big.img') }, run: ['true'] });`);
  const result = await interruptedReading(image);
  expect(result.stderr).toContain('error[interrupted]: interrupted while checking what is in place: nothing was changed\n');
  expect(existsSync(rig.path('.nodegraph'))).toBe(false);
  const plan = await rig.run(['plan']);
  expect(plan.stdout).toMatch(/^ {2}\+ boot\s+create\s+never ran$/m);
  expect(plan.stderr).toBe('');
  expect((await rig.run(['status'])).stdout).toMatch(/^boot\s+absent\s+never ran$/m);
  expect(existsSync(rig.path('.nodegraph'))).toBe(false);
});

test('Ctrl-C while a large output is hashed after its task ran ends the read at once: the task canceled, run again next time, exit 130', { timeout: 180_000 }, async () => {
  rig.nodefile(`ng.task('image', { outputs: ['out/big.img'], run: ['truncate', '-s', '${TERABYTE}', 'out/big.img'] });`);
  const result = await interruptedReading(rig.path('out/big.img'));
  expect(result.stdout).toContain('✖ image canceled\n');
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(false);
  // What it made is not known: not recorded as made.
  expect((await rig.run(['plan'])).stdout).toMatch(/~ image\s+update\s+last run was canceled\n/);
});

test('Ctrl-C while the Nodefile loads (its top level awaits) ends the run at once: interrupted while loading, no state folder, exit 130', async () => {
  // The top level says it is loading, then waits longer than the test would.
  rig.write(
    'Nodefile.ts',
    `import { writeFileSync } from 'node:fs';
writeFileSync('loading', '');
await new Promise((resolve) => setTimeout(resolve, 120_000));
export default (ng: any) => { ng.task('a', { run: ['true'] }); };
`,
  );
  for (const args of [['apply'], ['plan'], ['status', '--json']]) {
    rmSync(rig.path('loading'), { force: true });
    const child = rig.spawn(args);
    spawned.push(child);
    const done = collect(child);
    await until(() => existsSync(rig.path('loading')));
    child.kill('SIGINT');
    const result = await done;
    expect(result.code, args.join(' ')).toBe(130);
    expect(result.stderr, args.join(' ')).toContain('error[interrupted]: interrupted while loading the Nodefile: nothing was changed\n');
  }
  expect(existsSync(rig.path('.nodegraph'))).toBe(false);
});

test('Ctrl-C during a stop or destroy action says it was canceled, in text and JSON, as apply does, and exits 130', async () => {
  rig.nodefile(`
    const a = ng.task('a', { run: ['true'], stop: { shell: 'touch stopping; exec sleep 30' } });
    ng.task('b', { run: ['true'], after: [a], stop: ['true'] });
  `);
  expect((await rig.run(['apply'])).code).toBe(0);
  for (const args of [['stop'], ['stop', '--json'], ['destroy', '--yes'], ['destroy', '--yes', '--json']]) {
    rmSync(rig.path('stopping'), { force: true });
    const child = rig.spawn(args);
    spawned.push(child);
    const done = collect(child);
    await until(() => existsSync(rig.path('stopping')));
    child.kill('SIGINT');
    const result = await done;
    const what = args.join(' ');
    expect(result.code, what).toBe(130);
    if (args.includes('--json')) {
      const events = result.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      for (const event of events) valid('events', event);
      expect(events.find((e) => e['type'] === 'destroy-done' && e['id'] === 'a'), what).toMatchObject({ outcome: 'canceled', action: args[0] });
      expect(events.at(-1), what).toMatchObject({ type: 'summary', counts: { failed: 0, canceled: 1 }, failures: [{ id: 'a', outcome: 'canceled' }] });
    } else {
      expect(result.stdout, what).toMatch(/^\[\d\/\d\] ✖ a canceled$/m);
      expect(result.stdout, what).toMatch(/^(Stop|Destroy): \d \w+, 0 failed, 1 canceled, 0 kept in /m);
      expect(result.stdout, what).toContain('\nCanceled: a\n');
    }
  }
  // Cut short, the teardown is not trusted as done: the next apply runs a again.
  expect((await rig.run(['plan'])).stdout).toMatch(/~ a\s+update/);
});

test('after kill -9 mid-apply the state is valid, finished tasks do not re-run, and apply converges', async () => {
  const n = 30;
  rig.nodefile(`
    let previous;
    for (let i = 0; i < ${n}; i++) {
      previous = ng.task('step/' + i, {
        inputs: previous === undefined ? {} : { previous },
        outputs: ['out/' + i],
        run: { shell: 'sleep 0.05; echo ' + i + ' > out/' + i },
      });
    }
  `);
  const child = rig.spawn(['apply', '-j', '1']);
  const done = collect(child);
  await until(() => existsSync(rig.path('out/10')));
  child.kill('SIGKILL');
  await done;
  const finished = readdirSync(rig.path('out')).length;
  expect(finished).toBeLessThan(n);
  const again = await rig.run(['apply', '--json', '-j', '1']);
  expect(again.code).toBe(0);
  const rerun = ranIds(again.stdout);
  // At most the task that was running when the process died runs again.
  expect(rerun.length).toBeLessThanOrEqual(n - finished + 1);
  expect(rerun.length).toBeGreaterThanOrEqual(n - finished);
  expect(again.stdout).toContain('took over the state lock');
  const third = await rig.run(['apply', '--json']);
  expect(ranIds(third.stdout)).toEqual([]);
});

test('an unwritable state dir is one clear error and writes nothing', async () => {
  rig.write('blocker', 'a file, not a folder\n');
  rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
  const result = await rig.run(['apply', '--state-dir', 'blocker/state']);
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(/^error\[state-dir-unwritable\]: cannot write to the state folder \S+blocker\/state: not a directory \(ENOTDIR\)\n$/);
  expect(rig.exists('out')).toBe(false);
});

test('a state folder that cannot be made where mkdir says ENOENT of a parent that exists (/proc) is that error, not a hang', async () => {
  rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
  const child = rig.spawn(['apply', '--state-dir', '/proc/nodegraph-state']);
  spawned.push(child);
  const result = await collect(child);
  expect(result.code).toBe(1);
  expect(result.stderr).toBe('error[state-dir-unwritable]: cannot write to the state folder /proc/nodegraph-state: no such file or directory (ENOENT)\n');
  expect(rig.exists('out')).toBe(false);
}, 20_000);

test('nodegraph unlock removes a lock and says whose it was', async () => {
  rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
  const none = await rig.run(['unlock']);
  expect(none.stdout).toBe('The state was not locked.\n');
  rig.write('.nodegraph/lock', JSON.stringify({ pid: 1, host: 'elsewhere', command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 'x' }));
  const refused = await rig.run(['apply']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toBe(
    "error[locked]: the state is locked by pid 1 on elsewhere (nodegraph apply), since 2026-01-01T00:00:00.000Z; that host's processes cannot be seen from here: if that one is gone, run `nodegraph unlock`\n",
  );
  const removed = await rig.run(['unlock']);
  expect(removed.stdout).toBe('Removed the lock held by pid 1 on elsewhere (nodegraph apply), since 2026-01-01T00:00:00.000Z.\n');
  expect((await rig.run(['apply'])).code).toBe(0);
});

test('nodegraph unlock --json says in one document whether it removed a lock, and whose', async () => {
  rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
  const none = await rig.run(['unlock', '--json']);
  expect(JSON.parse(none.stdout)).toEqual({ format: 'nodegraph-unlock', version: 1, removed: false });
  const holder = { pid: 1, host: 'elsewhere', command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z' };
  rig.write('.nodegraph/lock', JSON.stringify({ ...holder, token: 'x' }));
  const removed = await rig.run(['unlock', '--json']);
  expect(removed.code).toBe(0);
  expect(removed.stdout.split('\n')).toHaveLength(2);
  expect(JSON.parse(removed.stdout)).toEqual({ format: 'nodegraph-unlock', version: 1, removed: true, holder });
});

test('nodegraph unlock refuses the lock of a run still going on this host, unless --force', async () => {
  rig.nodefile(`ng.task('slow', { outputs: ['out/slow'], run: { shell: 'sleep 3; touch out/slow' } });`);
  const first = rig.spawn(['apply']);
  const done = collect(first);
  await until(() => existsSync(rig.path('.nodegraph/lock')));
  const refused = await rig.run(['unlock']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(new RegExp(`^error\\[locked\\]: the lock is held by pid ${first.pid} \\(nodegraph apply, since \\S+\\), which is running on this host: stop it \\(Ctrl-C\\), or pass --force to remove its lock anyway\n$`));
  expect(existsSync(rig.path('.nodegraph/lock'))).toBe(true);
  const forced = await rig.run(['unlock', '--force']);
  expect(forced.stdout).toMatch(new RegExp(`^Removed the lock held by pid ${first.pid} on `));
  expect((await done).code).toBe(0);
});
