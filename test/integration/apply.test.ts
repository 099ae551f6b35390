// The real CLI on temporary folders: what runs, what does not, and why.

import { chmodSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { planNodefile } from '../../src/operations.ts';
import { alive, Rig } from '../support/rig.ts';

interface Event {
  type: string;
  id?: string;
  outcome?: string;
  reason?: string;
  counts?: Record<string, number>;
}

const events = (stdout: string): Event[] =>
  stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Event);

const ran = (stdout: string): string[] =>
  events(stdout)
    .filter((e) => e.type === 'task-done' && e.outcome === 'ran')
    .map((e) => e.id!)
    .sort();

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

// a.txt → A (copies) → B (appends) ; C independent; D after B (order only)
const chain = `
  const a = ng.task('chain/a', { inputs: { src: ng.file('a.txt') }, outputs: ['out/a'], run: ['cp', 'a.txt', 'out/a'] });
  const b = ng.task('chain/b', { inputs: { a }, outputs: ['out/b'], run: { shell: 'cat out/a > out/b; echo tail >> out/b' } });
  ng.task('chain/c', { inputs: { v: ng.value({ n: 1 }) }, outputs: ['out/c'], run: ['sh', '-c', 'echo c > out/c'] });
  ng.task('chain/d', { after: [b], outputs: ['out/d'], run: ['cp', 'out/b', 'out/d'] });
`;

describe('apply', () => {
  test('first apply runs everything; a second runs nothing', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    const first = await rig.run(['apply', '--json']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(ran(first.stdout)).toEqual(['chain/a', 'chain/b', 'chain/c', 'chain/d']);
    expect(rig.read('out/b')).toBe('hello\ntail\n');

    const second = await rig.run(['apply', '--json']);
    expect(second.code).toBe(0);
    expect(ran(second.stdout)).toEqual([]);
    const plan = await rig.run(['plan', '--detailed-exitcode']);
    expect(plan.stdout).toBe('No changes: 4 tasks up to date.\n');
    expect(plan.code).toBe(0);
  });

  test('plan and status on a project never applied write nothing: no state folder appears', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    expect((await rig.run(['plan'])).code).toBe(0);
    expect((await rig.run(['status'])).code).toBe(0);
    expect(rig.exists('.nodegraph')).toBe(false);
    expect((await rig.run(['plan', '--state-dir', 'elsewhere'])).code).toBe(0);
    expect(rig.exists('elsewhere')).toBe(false);
  });

  test('an input edit re-runs its consumers; an order edge does not trigger', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    await rig.run(['apply']);
    rig.write('a.txt', 'changed\n');
    const plan = await rig.run(['plan', '--detailed-exitcode']);
    expect(plan.code).toBe(2);
    expect(plan.stdout).toMatch(/~ chain\/a\s+update\s+input src changed [0-9a-f]{8}→[0-9a-f]{8}/);
    expect(plan.stdout).toMatch(/\? chain\/b\s+may update\s+known after chain\/a/);
    expect(plan.stdout).toContain('Plan: 0 to create, 1 to update, 1 known after apply, 0 to destroy; 2 unchanged.');
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual(['chain/a', 'chain/b']);
    expect(rig.read('out/b')).toBe('changed\ntail\n');
  });

  test('checks run in parallel, up to -j: a graph of services waits for its slowest check, not for their sum', async () => {
    // Each check notes when it starts and ends; ordered by time, -j 4 starts all four before any ends. While
    // there is a barrier file, a check ends only once all four have started (run one at a time, the plan would
    // not end); without it, a check takes half a second, time enough for another to start beside it.
    const check = `echo "$(date +%s%N) start" >> checks.log; if [ -e barrier ]; then until [ "$(grep -c start checks.log)" -ge 4 ]; do sleep 0.01; done; else sleep 0.5; fi; echo "$(date +%s%N) end" >> checks.log`;
    const services = [0, 1, 2, 3].map((i) => `ng.task('svc/${i}', { run: ['true'], check: { shell: ${JSON.stringify(check)} } });`).join('\n');
    rig.nodefile(services);
    expect((await rig.run(['apply'])).code).toBe(0);
    const order = (): string[] =>
      rig
        .read('checks.log')
        .trim()
        .split('\n')
        .map((l) => l.split(' ') as [string, string])
        .sort((x, y) => (BigInt(x[0]) < BigInt(y[0]) ? -1 : 1))
        .map(([, what]) => what);
    rmSync(rig.path('checks.log'), { force: true });
    rig.write('barrier', '');
    expect((await rig.run(['plan', '-j', '4'])).code).toBe(0);
    expect(order()).toEqual(['start', 'start', 'start', 'start', 'end', 'end', 'end', 'end']);
    rmSync(rig.path('barrier'));
    rmSync(rig.path('checks.log'));
    expect((await rig.run(['plan', '-j', '1'])).code).toBe(0);
    expect(order()).toEqual(['start', 'end', 'start', 'end', 'start', 'end', 'start', 'end']);
  });

  test('a function task is told what changed: every input on a first or forced run, then only the edited one', async () => {
    rig.write('a.txt', 'a\n');
    rig.write('b.txt', 'b\n');
    // Both with and without an upstream: a first run of a task that consumes nothing decides as all such do.
    rig.nodefile(`
      const { writeFileSync } = process.getBuiltinModule('node:fs');
      const told = (file) => (ctx) =>
        writeFileSync(ctx.cwd + '/' + file, JSON.stringify({ first: ctx.firstRun, inputs: ctx.changedInputs, upstream: ctx.changedUpstream }));
      const alone = ng.task('told/alone', { inputs: { a: ng.file('a.txt'), b: ng.file('b.txt'), v: ng.value(1) }, outputs: ['alone.json'], run: told('alone.json') });
      ng.task('told/after', { inputs: { up: alone, b: ng.file('b.txt') }, outputs: ['after.json'], run: told('after.json') });
    `);
    const told = (file: string): unknown => JSON.parse(rig.read(file));
    expect((await rig.run(['apply'])).code).toBe(0);
    expect(told('alone.json')).toEqual({ first: true, inputs: ['a', 'b', 'v'], upstream: [] });
    expect(told('after.json')).toEqual({ first: true, inputs: ['b'], upstream: ['told/alone'] });

    rig.write('b.txt', 'B\n');
    expect((await rig.run(['apply'])).code).toBe(0);
    expect(told('alone.json')).toEqual({ first: false, inputs: ['b'], upstream: [] });
    expect(told('after.json')).toEqual({ first: false, inputs: ['b'], upstream: ['told/alone'] });

    expect((await rig.run(['apply', '--replace', 'told/alone', '--replace', 'told/after'])).code).toBe(0);
    expect(told('alone.json')).toEqual({ first: false, inputs: ['a', 'b', 'v'], upstream: [] });
    expect(told('after.json')).toEqual({ first: false, inputs: ['b'], upstream: ['told/alone'] });
  });

  test('touching an input without changing it runs nothing', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    await rig.run(['apply']);
    const later = new Date(Date.now() + 5000);
    utimesSync(rig.path('a.txt'), later, later);
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual([]);
  });

  test('early cutoff: an upstream that re-runs to the same output leaves its consumers alone', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(`
      const norm = ng.task('norm', { inputs: { src: ng.file('a.txt') }, outputs: ['out/norm'], run: { shell: 'tr -d " " < a.txt > out/norm' } });
      ng.task('use', { inputs: { norm }, outputs: ['out/use'], run: ['cp', 'out/norm', 'out/use'] });
    `);
    await rig.run(['apply']);
    rig.write('a.txt', 'hel lo\n'); // same after removing spaces
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual(['norm']);
    expect(events(apply.stdout).find((e) => e.id === 'use')?.outcome).toBe('up-to-date');
  });

  test('an output changed outside nodegraph is drift: the task re-runs and says why', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    await rig.run(['apply']);
    writeFileSync(rig.path('out/c'), 'tampered\n');
    const plan = await rig.run(['plan']);
    expect(plan.stdout).toContain(`! chain/c  update  output ${rig.path('out/c')} modified outside nodegraph`);
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual(['chain/c']);
    expect(rig.read('out/c')).toBe('c\n');
  });

  test('a removed output is drift too', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    await rig.run(['apply']);
    rmSync(rig.path('out/d'));
    const plan = await rig.run(['plan']);
    expect(plan.stdout).toContain(`! chain/d  update  output ${rig.path('out/d')} missing`);
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual(['chain/d']);
    expect(readFileSync(rig.path('out/d'), 'utf8')).toBe('hello\ntail\n');
  });

  test('editing a command re-runs the task', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    await rig.run(['apply']);
    rig.nodefile(chain.replace("'echo c > out/c'", "'echo C > out/c'"));
    const plan = await rig.run(['plan']);
    expect(plan.stdout).toMatch(/~ chain\/c\s+update\s+definition changed/);
    const apply = await rig.run(['apply', '--json']);
    expect(ran(apply.stdout)).toEqual(['chain/c']);
  });

  test('--replace forces a task; targets limit the run to what they need', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    const targeted = await rig.run(['apply', '--json', 'chain/b']);
    expect(ran(targeted.stdout)).toEqual(['chain/a', 'chain/b']);
    const plan = await rig.run(['plan', '--replace', 'chain/c']);
    expect(plan.stdout).toMatch(/± chain\/c\s+replace\s+forced by --replace\n/);
    expect(plan.stdout).toContain('Plan: 1 to create, 0 to update, 1 to replace, 0 to destroy; 2 unchanged.');
    const forced = await rig.run(['apply', '--json', '--replace', 'chain/c']);
    expect(ran(forced.stdout)).toEqual(['chain/c', 'chain/d']);
  });

  test('a failure skips its dependents and is shown with its command and output; -k goes on', async () => {
    rig.write('a.txt', 'hello\n');
    rig.nodefile(`
      const bad = ng.task('bad', { outputs: ['out/bad'], run: ['sh', '-c', 'echo boom >&2; exit 3'] });
      ng.task('after-bad', { inputs: { bad }, outputs: ['out/x'], run: ['touch', 'out/x'] });
      ng.task('other', { outputs: ['out/other'], run: ['touch', 'out/other'] });
    `);
    const result = await rig.run(['apply', '-j', '1', '-k']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("✖ bad failed: exited with code 3\n    $ sh -c 'echo boom >&2; exit 3'\n    boom\n");
    expect(result.stdout).toContain('- after-bad skipped (bad did not succeed)');
    expect(rig.exists('out/other')).toBe(true);
    const plan = await rig.run(['plan']);
    expect(plan.stdout).toMatch(/~ bad\s+update\s+last run failed: exited with code 3\n/);
  });

  test('a failure stops the run; a task the plan found unchanged is up to date, not skipped', async () => {
    rig.write('b.txt', 'good\n');
    rig.nodefile(`
      ng.task('breaks', { inputs: { src: ng.file('b.txt') }, outputs: ['out/b'], run: ['sh', '-c', 'grep -q good b.txt && cp b.txt out/b'] });
      ng.task('steady', { outputs: ['out/s'], run: ['touch', 'out/s'] });
    `);
    expect((await rig.run(['apply'])).code).toBe(0);
    rig.write('b.txt', 'bad\n');
    // One job: 'breaks' runs first and fails while 'steady' has not been looked at.
    const result = await rig.run(['apply', '-j', '1', '--json']);
    expect(result.code).toBe(1);
    const summary = events(result.stdout).find((e) => e.type === 'summary');
    expect(summary?.counts).toMatchObject({ ran: 0, failed: 1, skipped: 0, 'up-to-date': 1 });
  });

  test('a function that returns what JSON cannot hold fails its task, and the run ends as any failed run does', async () => {
    rig.nodefile(`
      ng.task('slow', { outputs: ['out/slow'], run: ['sh', '-c', 'sleep 0.5; echo done > out/slow'] });
      ng.task('nan', { run: async () => { await new Promise((r) => setTimeout(r, 100)); return { n: NaN }; } });
      ng.task('big', { run: () => 10n });
    `);
    const result = await rig.run(['apply', '-k', '-j', '4']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('✖ nan failed: returned a value that is not JSON (NaN at $.n is not a finite number)\n');
    expect(result.stdout).toContain('✖ big failed: returned a value that is not JSON (a bigint at $ has no JSON form (convert it to a string))\n');
    expect(result.stdout).toMatch(/Apply: 1 ran, 2 failed/);
    expect(rig.read('out/slow')).toBe('done\n');
    expect(rig.exists('.nodegraph/lock')).toBe(false);
  });

  test("a task whose check still fails after it ran has failed: it did not bring about what it manages", async () => {
    rig.nodefile(`
      ng.task('never', { run: ['true'], check: () => 'not today' });
      ng.task('works', { run: ['touch', 'up'], check: ['test', '-e', 'up'] });
    `);
    const result = await rig.run(['apply', '-k']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('✖ never failed: ran, but its check still fails: not today\n');
    expect(result.stdout).toMatch(/✔ works \d+ms\n/);
    expect((await rig.run(['plan'])).stdout).toMatch(/~ never\s+update\s+last run failed: ran, but its check still fails: not today\n/);
  });

  test('a task declared after the Nodefile returned (from a timer) is in no graph, and a warning says so', async () => {
    rig.nodefile(`
      // Declared once a runs (the graph is made by then), and a waits for it: no timing to win.
      ng.task('a', { outputs: ['out/a'], run: ['sh', '-c', 'touch started; until [ -e declared ]; do sleep 0.01; done; touch out/a'] });
      const fs = process.getBuiltinModule('node:fs');
      const timer = setInterval(() => {
        if (!fs.existsSync(ng.dir + '/started')) return;
        clearInterval(timer);
        ng.task('late', { outputs: ['out/late'], run: ['touch', 'out/late'] });
        fs.writeFileSync(ng.dir + '/declared', '');
      }, 10);
    `);
    const result = await rig.run(['apply']);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(
      "warning: task late was declared after the Nodefile's default function returned, so it is in no graph: declare it before the function returns (await what it waits for)\n",
    );
    expect(rig.exists('out/late')).toBe(false);
  });

  test('a folder for an output that cannot be made fails the task before it runs, saying why', async () => {
    rig.write('blocker', 'a file where a folder should be\n');
    rig.nodefile(`ng.task('a', { outputs: ['blocker/out'], run: ['sh', '-c', 'echo ran > ran.txt'] });`);
    const result = await rig.run(['apply']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/✖ a failed: could not make the folder for its output blocker\/out: EEXIST: file already exists, mkdir '.*blocker'\n/);
    expect(rig.exists('ran.txt')).toBe(false);
  });

  test('a cwd that does not exist is said to be the cause, not the program', async () => {
    rig.nodefile(`ng.task('a', { cwd: 'nope', run: ['pwd'] });`);
    const result = await rig.run(['apply']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`✖ a failed: cannot run in ${rig.path('nope')}: no such folder (spawn pwd ENOENT)\n`);
    rig.nodefile(`ng.task('a', { run: ['no-such-program-here'] });`);
    expect((await rig.run(['apply'])).stdout).toContain('✖ a failed: no-such-program-here is not found on PATH (spawn no-such-program-here ENOENT)\n');
    // By path: not there, there without its #! interpreter, not executable.
    rig.write('bin/script', '#!/no/such/interpreter\n');
    rig.write('bin/plain', 'echo\n');
    chmodSync(rig.path('bin/script'), 0o755);
    rig.nodefile(`ng.task('gone', { run: ['./bin/gone'] }); ng.task('script', { run: ['./bin/script'] }); ng.task('plain', { run: ['./bin/plain'] });`);
    const byPath = (await rig.run(['apply', '-k'])).stdout;
    expect(byPath).toContain('✖ gone failed: ./bin/gone does not exist (spawn ./bin/gone ENOENT)\n');
    expect(byPath).toContain('✖ script failed: ./bin/script: its #! interpreter is not found (spawn ./bin/script ENOENT)\n');
    expect(byPath).toContain('✖ plain failed: ./bin/plain cannot be run: permission denied (spawn ./bin/plain EACCES)\n');
  });

  test('a job a command leaves holding its output does not hold the run: it runs on, and the run says so', async () => {
    rig.nodefile(`ng.task('cmd', { run: { shell: 'sleep 60 & echo $! > cmd.pid; echo started' } });
  ng.task('fn', { run: async (ctx) => { await ctx.exec(['sh', '-c', 'sleep 60 & echo $! > fn.pid']); } });`);
    for (const env of [{}, { NODEGRAPH_SPAWN_SERVER: 'off' }] as Record<string, string>[]) {
      const result = await rig.run(['apply', '-j', '2', '--replace', 'cmd', '--replace', 'fn'], env);
      const jobs = ['cmd.pid', 'fn.pid'].map((f) => Number(rig.read(f)));
      for (const job of jobs) process.kill(job, 'SIGKILL'); // alive, or the kill would throw
      expect(result.code).toBe(0);
      const held = (id: string, which: string): string =>
        `warning: task ${id}: ${which} exited, and a process it started still held its output 2 s later: nodegraph stopped reading it, and the process runs on (redirect its output, \`> file 2>&1\`, or start it as a service)\n`;
      expect(result.stdout).toContain(held('cmd', 'its command'));
      expect(result.stdout).toContain(held('fn', "`sh -c 'sleep 60 & echo $! > fn.pid'`"));
      expect(result.stdout).toMatch(/✔ cmd .*\n {4}started\n/);
    }
    // And a stop command's, in a teardown.
    rig.nodefile(`ng.task('svc', { run: ['true'], stop: { shell: 'sleep 60 & echo $! > stop.pid' } });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    const stopped = await rig.run(['stop']);
    process.kill(Number(rig.read('stop.pid')), 'SIGKILL');
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toContain("warning: task svc: `/bin/sh -c 'sleep 60 & echo $! > stop.pid'` exited, and a process it started still held its output 2 s later");
  });

  test('a task past its timeout is stopped and fails, as its check is; a timeout changed re-runs nothing', async () => {
    const nodefile = (fine: string): string => `ng.task('slow', { run: { shell: 'echo $$ > slow.pid; exec sleep 3600' }, timeout: '300ms' });
  ng.task('fn', { run: () => new Promise(() => {}), timeout: '300ms' });
  ng.task('checked', { run: ['true'], check: { shell: 'echo $$ > check.pid; exec sleep 3600' }, timeout: '300ms' });
  ng.task('fine', { run: ['true'], timeout: '${fine}' });`;
    rig.nodefile(nodefile('30s'));
    const result = await rig.run(['apply', '-k']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('Failed: slow (timed out after 300ms, and was stopped)\n');
    expect(result.stdout).toContain('Failed: fn (timed out after 300ms, and was stopped)\n');
    expect(result.stdout).toContain('Failed: checked (ran, but its check still fails: it did not answer within its timeout of 300ms, and was stopped)\n');
    expect(result.stdout).toContain('✔ fine');
    // Stopped as on Ctrl-C: the test's timeout is the deadline for them to be gone.
    for (const file of ['slow.pid', 'check.pid']) await exited(rig, file);
    rig.nodefile(nodefile('45s'));
    expect((await rig.run(['plan', 'fine', '--detailed-exitcode'])).code).toBe(0);
  });

  test("a task's timeout bounds its stop and its destroy, from its record once it has left the Nodefile", async () => {
    const hang = (what: string): string => `{ shell: 'echo $$ > ${what}.pid; exec sleep 3600' }`;
    rig.nodefile(`ng.task('svc', { run: ['true'], stop: ${hang('stop')}, destroy: ${hang('destroy')}, timeout: '300ms' });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    const gone = (file: string): Promise<void> => exited(rig, file);
    const stopped = await rig.run(['stop']);
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toContain("Failed: svc (/bin/sh -c 'echo $$ > stop.pid; exec sleep 3600': timed out after 300ms, and was stopped)");
    await gone('stop.pid');
    // Gone from the Nodefile, the task is retired by what its record says, its timeout with it.
    rig.nodefile(`ng.task('other', { run: ['true'] });`);
    const retired = await rig.run(['apply']);
    // An orphan that would not go fails the apply, as a task that failed does.
    expect(retired.code).toBe(1);
    expect(retired.stdout).toContain('Apply: 1 ran, 1 failed,');
    expect(retired.stdout).toContain("Failed: svc (/bin/sh -c 'echo $$ > stop.pid; exec sleep 3600': timed out after 300ms, and was stopped)");
    await gone('stop.pid');
    rig.write('stop.pid', '');
    rig.nodefile(`ng.task('svc', { run: ['true'], stop: ['true'], destroy: ${hang('destroy')}, timeout: '300ms' });`);
    const destroyed = await rig.run(['destroy', '--yes']);
    expect(destroyed.code).toBe(1);
    expect(destroyed.stdout).toContain("Failed: svc (/bin/sh -c 'echo $$ > destroy.pid; exec sleep 3600': timed out after 300ms, and was stopped)");
    await gone('destroy.pid');
  });

  test('a run that waits on a check says which, and what would bound it', async () => {
    const nodefile = rig.nodefile(`ng.task('slow', { run: ['true'], check: ['sleep', '1'] });
  ng.task('bounded', { run: ['true'], check: ['sleep', '1'], timeout: '1m' });
  ng.task('quick', { run: ['true'], check: ['true'] });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    const warnings: string[] = [];
    const planned = await planNodefile({ nodefile, slowCheckMs: 50, onEvent: (e) => void (e.type === 'warning' && warnings.push(e.message)) });
    expect(planned.ok).toBe(true);
    expect(warnings.sort()).toEqual([
      'bounded: its check has not answered after 0.05 s, and the run waits for it (its timeout of 1m bounds it; Ctrl-C stops it)',
      'slow: its check has not answered after 0.05 s, and the run waits for it (it has no `timeout` to bound it; Ctrl-C stops it)',
    ]);
  });

  test('a declared output the task did not write fails it', async () => {
    rig.nodefile(`ng.task('liar', { outputs: ['out/promised'], run: ['true'] });`);
    const result = await rig.run(['apply']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain('✖ liar failed: declared output out/promised was not produced');
  });

  test('a Nodefile is an ES module even below a package.json that says "type": "commonjs" (what npm init -y writes)', async () => {
    rig.write('package.json', JSON.stringify({ name: 'a-node', version: '1.0.0', type: 'commonjs' }));
    rig.write('a.txt', 'hello\n');
    rig.nodefile(chain);
    const result = await rig.run(['apply']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(readFileSync(rig.path('out/b'), 'utf8')).toBe('hello\ntail\n');
  });

  test('so is a .ts module the Nodefile imports from its own files there; a .cts one stays CommonJS', async () => {
    rig.write('package.json', JSON.stringify({ name: 'a-node', version: '1.0.0', type: 'commonjs' }));
    rig.write('lib/names.ts', `import { more } from './more.ts';\nexport const names: string[] = ['a', ...more];\n`);
    rig.write('lib/more.ts', `export const more = ['b'];\n`);
    rig.write('lib/legacy.cts', `module.exports = { last: 'c' };\n`);
    rig.write(
      'Nodefile.ts',
      `import { names } from './lib/names.ts';\nimport legacy from './lib/legacy.cts';\nexport default (ng: any) => {\n  for (const n of [...names, legacy.last]) ng.task('t/' + n, { outputs: ['out/' + n], run: ['touch', 'out/' + n] });\n};\n`,
    );
    const result = await rig.run(['apply']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(['a', 'b', 'c'].map((n) => rig.exists(`out/${n}`))).toEqual([true, true, true]);
  });
});

describe('a task that gathers many', () => {
  // Twelve parts read one shared file; `gather` concatenates them all.
  const fanIn = `
    const parts = {};
    for (let i = 0; i < 12; i++) {
      parts['p' + i] = (ng.task('part/' + i, { inputs: { shared: ng.file('shared.txt') }, outputs: ['out/' + i], run: { shell: 'cat shared.txt > out/' + i + '; echo ' + i + ' >> out/' + i } }));
    }
    ng.task('gather', { inputs: parts, outputs: ['out/all'], run: { shell: 'cat out/[0-9]* > out/all' } });
  `;

  test('the plan and the live line name a few of its reasons and count the rest; explain and --json give them all', async () => {
    rig.write('shared.txt', 'one\n');
    rig.nodefile(fanIn);
    expect((await rig.run(['apply'])).code).toBe(0);
    rig.write('shared.txt', 'two\n');

    const plan = await rig.run(['plan']);
    const line = plan.stdout.split('\n').find((l) => l.includes('gather'))!;
    expect(line).toMatch(/^  \? gather\s+may update\s+known after part\/0, part\/1, part\/2 and 9 more \(all: nodegraph explain gather\)$/);

    const json = JSON.parse((await rig.run(['plan', '--json'])).stdout) as { entries: { id: string; reasons: string[] }[] };
    expect(json.entries.find((e) => e.id === 'gather')!.reasons).toEqual(Array.from({ length: 12 }, (_, i) => `known after part/${i}`));
    const explain = await rig.run(['explain', 'gather']);
    expect(explain.stdout.match(/^  because known after part\/\d+$/gm)).toHaveLength(12);

    // Every part's output changed: gather runs for twelve reasons and its live line names three.
    const apply = await rig.run(['apply', '--json']);
    const start = events(apply.stdout).find((e) => e.type === 'task-start' && e.id === 'gather')!;
    expect(start.reason).toMatch(/^upstream part\/0 changed [0-9a-f]{8}→[0-9a-f]{8}; upstream part\/1 changed \S+; upstream part\/2 changed \S+; and 9 more$/);
    expect(rig.read('out/all')).toBe(Array.from({ length: 12 }, (_, i) => `two\n${i}\n`).sort().join(''));
  });
});

/**
 * Waits until the process whose pid a command wrote to `file` is gone (or a zombie); the test's timeout is the
 * deadline. No file: the command was stopped before it wrote one, and nothing of it runs.
 */
async function exited(rig: Rig, file: string): Promise<void> {
  const pid = rig.exists(file) ? Number(rig.read(file)) : 0;
  while (pid > 0 && alive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
}
