// The live view in a real terminal (tmux): what it shows while tasks run,
// and the screen it leaves when the run is over.

import { afterEach, beforeEach, expect, test } from 'vitest';
import { apiTypes, Rig } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';
import { hasTmux, Terminal } from '../support/terminal.ts';

let rig: Rig;
let term: Terminal | undefined;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => {
  term?.close();
  term = undefined;
  rig.cleanup();
});

const waitFor = (file: string): string => `while [ ! -e ${file} ]; do sleep 0.02; done`;

test.skipIf(!hasTmux)('running rows count up with their last line, queued rows wait, finished rows keep their outcome to the end', async () => {
  rig.write(
    'Nodefile.ts',
    `import { existsSync } from 'node:fs';
import type { NodefileApi } from ${JSON.stringify(apiTypes)};
export default (ng: NodefileApi) => {
  const fast = ng.task('fast', { run: ['true'] });
  const slow = ng.task('slow', {
    run: async (ctx) => {
      ctx.log('fetching layer 3 of 7');
      while (!existsSync(${JSON.stringify(rig.path('go2'))})) await new Promise((r) => setTimeout(r, 20));
    },
  });
  const bad = ng.task('bad', { inputs: { fast }, run: { shell: '${waitFor('go')}; echo boom >&2; exit 3' } });
  ng.task('next', { inputs: { slow }, run: ['true'] });
  ng.task('after', { inputs: { bad }, run: ['true'] });
};
`,
  );
  term = new Terminal(rig.dir, ['apply', '-j', '4']);

  // Mid-run: the status line counts, a running row shows its elapsed time and last line, queued rows do not spin.
  const running = await term.waitFor(/^(?=[\s\S]*fetching layer)(?=[\s\S]*^\S bad create \d)/m);
  expect(running).toMatch(/^\[1\/5\] ✔ fast \d+ms$/m);
  expect(running).toMatch(/^\S slow create (\d+ms|\d+\.\ds) {2}fetching layer 3 of 7$/m);
  expect(running).toMatch(/^\S bad create (\d+ms|\d+\.\ds)$/m);
  expect(running).toMatch(/^· next create queued$/m);
  expect(running).toMatch(/^· after create queued$/m);
  expect(running).toMatch(/^\[1\/5\] 2 running · 2 queued · (\d+ms|\d+\.\ds)$/m);

  // A failure is printed at once with its command and output; what waits on it does not spin.
  rig.write('go', '');
  const failed = await term.waitFor(/1 failed/);
  expect(failed).toContain(`[2/5] ✖ bad failed: exited with code 3\n    $ ${waitFor('go')}; echo boom >&2; exit 3\n    boom\n`);
  expect(failed).toMatch(/^· after create queued$/m);
  expect(failed).toMatch(/^\[2\/5\] 1 running · 2 queued · 1 failed · /m);

  rig.write('go2', '');
  const end = await term.waitFor(/^exit \d+$/m);
  const after = end.slice(end.indexOf('[1/5]'));
  expect(after.replace(/\d+(\.\d)?m?s\b/g, 'T')).toBe(
    [
      '[1/5] ✔ fast T',
      '[2/5] ✖ bad failed: exited with code 3',
      `    $ ${waitFor('go')}; echo boom >&2; exit 3`,
      '    boom',
      '[3/5] ✔ slow T',
      '[4/5] - next skipped (the run stopped after bad failed)',
      '[5/5] - after skipped (bad did not succeed)',
      'Apply: 2 ran, 1 failed, 2 skipped, 0 canceled, 0 up to date, 0 destroyed in T.',
      'Failed: bad (exit 3), 1 skipped because of it; output in .nodegraph/logs/tasks/bad.log',
      'Not started: 1 skipped because the run stopped after bad failed',
      'exit 1',
    ].join('\n'),
  );
});

test.skipIf(!hasTmux)('Ctrl-C: the notice is not drawn over, the canceled row and the skipped one say so, nothing is left spinning', async () => {
  rig.nodefile(`
    const a = ng.task('a', { run: ['true'] });
    const b = ng.task('b', { inputs: { a }, run: ['sleep', '30'] });
    ng.task('c', { inputs: { b }, run: ['true'] });
  `);
  term = new Terminal(rig.dir, ['apply']);
  await term.waitFor(/^\S b create \d/m);
  term.keys('C-c');
  const end = await term.waitFor(/^exit \d+$/m);
  expect(end.slice(end.indexOf('[1/3]')).replace(/\d+(\.\d)?m?s\b/g, 'T')).toBe(
    [
      '[1/3] ✔ a T',
      '',
      'interrupted: stopping running tasks (Ctrl-C again to quit at once)',
      '[2/3] ✖ b canceled',
      '    $ sleep 30',
      '[3/3] - c skipped (b did not succeed)',
      'Apply: 1 ran, 0 failed, 1 skipped, 1 canceled, 0 up to date, 0 destroyed in T.',
      'Canceled: b, 1 skipped because of it',
      'exit 130',
    ].join('\n'),
  );
});

test.skipIf(!hasTmux)("Ctrl-C typed at destroy's question is a no, and an interrupt: nothing destroyed, no crash, the lock let go, exit 130", async () => {
  rig.nodefile(`ng.task('svc', { outputs: ['out/svc'], run: ['touch', 'out/svc'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  term = new Terminal(rig.dir, ['destroy']);
  await term.waitFor(/Only 'yes' will be accepted:/);
  term.keys('C-c');
  const end = await term.waitFor(/^exit \d+$/m);
  expect(end.slice(end.indexOf('Only'))).toBe(
    [
      "Only 'yes' will be accepted:",
      '',
      'interrupted: stopping running tasks (Ctrl-C again to quit at once)',
      'error[not-confirmed]: not confirmed: nothing was changed',
      'exit 130',
    ].join('\n'),
  );
  expect(rig.exists('out/svc')).toBe(true);
  expect(rig.exists('.nodegraph/lock')).toBe(false);
});

test.skipIf(!hasTmux)('destroy with its output sent to a log asks its question on the terminal by stderr, and the log keeps what it did', async () => {
  rig.nodefile(`ng.task('svc', { outputs: ['out/svc'], run: ['touch', 'out/svc'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  term = new Terminal(rig.dir, ['destroy'], { stdout: rig.path('destroy.log') });
  const asked = await term.waitFor(/Only 'yes' will be accepted:/);
  expect(asked).toContain('nodegraph will destroy 1 task, in this order:\n  - svc\n');
  term.keys('yes', 'Enter');
  await term.waitFor(/^exit 0$/m);
  expect(rig.read('destroy.log')).not.toContain('will destroy');
  expect(rig.read('destroy.log')).toMatch(/^Destroy: 1 destroyed/m);
  expect(rig.exists('out/svc')).toBe(false);
});

test.skipIf(!hasTmux)("destroy --json asks its question on the terminal by stderr: stdout holds the events alone", async () => {
  rig.nodefile(`ng.task('svc', { outputs: ['out/svc'], run: ['touch', 'out/svc'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  term = new Terminal(rig.dir, ['destroy', '--json'], { stdout: rig.path('events.jsonl') });
  const asked = await term.waitFor(/Only 'yes' will be accepted:/);
  expect(asked).toContain('nodegraph will destroy 1 task, in this order:\n  - svc\n');
  term.keys('yes', 'Enter');
  await term.waitFor(/^exit 0$/m);
  const lines = rig.read('events.jsonl').trimEnd().split('\n');
  for (const line of lines) valid('events', JSON.parse(line));
  expect(lines.map((line) => (JSON.parse(line) as { type: string }).type)).toEqual(['destroy-start', 'destroy-done', 'summary']);
  expect(rig.exists('out/svc')).toBe(false);
});

test.skipIf(!hasTmux)("a running command's last line shows on its row as it comes, through spawnd and without it, and from a function's ctx.exec", async () => {
  for (const [server, run] of [['on', "['sh', 'pull.sh']"], ['off', "['sh', 'pull.sh']"], ['on', "async (ctx) => { await ctx.exec(['sh', 'pull.sh']); }"]] as const) {
    rig.write('pull.sh', `echo "layer 1 of 2"\nprintf '\\033[32mlayer 2 of 2\\033[0m\\n'\n${waitFor('done')}\n`);
    rig.nodefile(`ng.task('pull', { run: ${run} });`);
    term = new Terminal(rig.dir, ['apply'], { env: { NODEGRAPH_SPAWN_SERVER: server } });
    const screen = await term.waitFor(/layer 2 of 2|^exit/m);
    expect(screen, server).toMatch(/^\S pull create (\d+ms|\d+\.\ds) {2}layer 2 of 2$/m);
    rig.write('done', '');
    await term.waitFor(/^exit 0$/m);
    term.close();
    term = undefined;
    rig.cleanup();
    rig = new Rig();
  }
});

// A terminal's scrollback (tmux's defaults: scroll-on-clear, 2000 lines of history) after a run with more tasks than
// rows holds what was printed once: the plan, one line per task, the summary. A stale frame would leave status
// lines (`[n/30] k running`) and running or queued rows behind.
for (const rows of [24, 15]) {
  test.skipIf(!hasTmux)(`30 tasks at 80×${rows}: the scrollback holds the plan, one line per task and the summary, no stale frame`, async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    rig.nodefile(ids.map((id) => `ng.task('${id}', { run: { shell: 'sleep 0.1' } });`).join('\n'));
    term = new Terminal(rig.dir, ['apply', '-j', '3'], { columns: 80, rows });
    await term.waitFor(/^exit \d+$/m);
    const all = term.scrollback().split('\n');
    const first = all.findIndex((l) => l.startsWith('[1/30] '));
    expect(all.slice(first).filter((l) => /running ·|^\S t\d\d create|^· /.test(l))).toEqual([]);
    const settled = all.slice(first, first + 30).map((l) => l.replace(/^\[\d+\/30\] ✔ (t\d\d) \d+(\.\d)?m?s$/, '$1'));
    expect(settled.toSorted()).toEqual(ids);
    expect(all.slice(first + 30)).toEqual([expect.stringMatching(/^Apply: 30 ran, 0 failed, .* in \S+\.$/), 'exit 0']);
    // Above the first task's line: the plan, whole and once (a create line per task, its counts, its legend).
    const plan = all.slice(0, first).filter((l) => l !== '');
    expect(plan.slice(0, 30).map((l) => l.replace(/^ {2}\+ (t\d\d) {2}create {2}never ran$/, '$1'))).toEqual(ids);
    expect(plan.slice(30)).toEqual(['Plan: 30 to create, 0 to update, 0 to destroy; 0 unchanged.', '+ create']);
    // In all, a line per task twice (the plan's, the outcome's) and four more: ninja leaves one per task.
    expect(all.filter((l) => l !== '')).toHaveLength(64);
  });
}

// A failure that printed 200 lines, a third of them to stderr: the last 20 in the order written, where the rest are,
// and a recap at the bottom; the same facts in the JSON events. Through spawnd and without it.
const loud = `
  const big = ng.task('gen/big', { run: { shell: 'i=1; while [ $i -le 200 ]; do if [ $((i % 3)) = 0 ]; then echo "line $i" >&2; else echo "line $i"; fi; i=$((i+1)); done; exit 2' } });
  const use = ng.task('use', { inputs: { big }, run: ['true'] });
  ng.task('use2', { inputs: { use }, run: ['true'] });
`;
const whole = Array.from({ length: 200 }, (_, i) => `line ${i + 1}\n`).join('');
const logFile = '.nodegraph/logs/tasks/gen%2Fbig.log';

test.each(['on', 'off'])('a failed task shows its command, exit code and last 20 lines, keeps the rest in its log, and the run ends with a recap (spawnd %s)', async (server) => {
  rig.nodefile(loud);
  const plain = await rig.run(['apply', '-k'], { NODEGRAPH_SPAWN_SERVER: server });
  expect(plain.code).toBe(1);
  const out = plain.stdout.slice(plain.stdout.indexOf('[1/3]')).replace(/\d+(\.\d)?m?s\b/g, 'T');
  expect(out).toBe(
    [
      '[1/3] ✖ gen/big failed: exited with code 2',
      `    $ i=1; while [ $i -le 200 ]; do if [ $((i % 3)) = 0 ]; then echo "line $i" >&2; else echo "line $i"; fi; i=$((i+1)); done; exit 2`,
      `    … 180 earlier lines in ${logFile}`,
      ...Array.from({ length: 20 }, (_, i) => `    line ${181 + i}`),
      '[2/3] - use skipped (gen/big did not succeed)',
      '[3/3] - use2 skipped (use did not succeed)',
      'Apply: 0 ran, 1 failed, 2 skipped, 0 canceled, 0 up to date, 0 destroyed in T.',
      `Failed: gen/big (exit 2), 2 skipped because of it; output in ${logFile}`,
      '',
    ].join('\n'),
  );
  // The log holds the whole output in the order written (stderr's lines among stdout's), the newest run only.
  expect(rig.read(logFile)).toBe(whole);

  const json = await rig.run(['apply', '-k', '--json'], { NODEGRAPH_SPAWN_SERVER: server });
  const events = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(events.find((e) => e['type'] === 'task-done' && e['id'] === 'gen/big')).toMatchObject({ outcome: 'failed', exitCode: 2, output: whole, log: rig.path(logFile) });
  expect(events.find((e) => e['type'] === 'summary')).toMatchObject({ failures: [{ id: 'gen/big', outcome: 'failed', what: 'exit 2', exitCode: 2, log: rig.path(logFile), skipped: ['use', 'use2'] }] });
  expect(rig.read(logFile)).toBe(whole);
});

test.skipIf(!hasTmux)('in the live view too: the last 20 lines under the failed row, the recap under the summary', async () => {
  rig.nodefile(loud);
  term = new Terminal(rig.dir, ['apply'], { columns: 200, rows: 40 });
  const end = await term.waitFor(/^exit \d+$/m);
  const lines = end.slice(end.indexOf('[1/3]')).split('\n');
  expect(lines[2]).toBe(`    … 180 earlier lines in ${logFile}`);
  expect(lines.slice(3, 23)).toEqual(Array.from({ length: 20 }, (_, i) => `    line ${181 + i}`));
  // Without -k, use2 is not started because the run stopped, not because of use.
  expect(lines.slice(-3)).toEqual([`Failed: gen/big (exit 2), 1 skipped because of it; output in ${logFile}`, 'Not started: 1 skipped because the run stopped after gen/big failed', 'exit 1']);
});

test('destroy counts against the whole it will settle: [1/3], [2/3], [3/3]', async () => {
  rig.nodefile(`
    const a = ng.task('a', { run: ['true'] });
    const b = ng.task('b', { inputs: { a }, run: ['true'] });
    ng.task('c', { inputs: { b }, run: ['true'] });
  `);
  expect((await rig.run(['apply'])).code).toBe(0);
  const destroyed = await rig.run(['destroy', '--yes']);
  expect(destroyed.stdout.split('\n').filter((l) => l.startsWith('['))).toEqual(['[1/3] ✔ c done', '[2/3] ✔ b done', '[3/3] ✔ a done']);
});
