// The node_exporter textfile (--metrics-file, NODEGRAPH_METRICS_FILE) through the real
// CLI: what each apply, rollback and status writes, counters kept across runs in the
// state folder, and every file written accepted by `promtool check metrics`.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { apiTypes, Rig } from '../support/rig.ts';

let rig: Rig;
/** Every metrics file the tests saw, for promtool. */
const written: { readonly what: string; readonly text: string }[] = [];

beforeAll(() => {
  rig = new Rig();
  mkdirSync(rig.path('metrics'));
});
afterAll(() => rig.cleanup());

const PROM = 'metrics/node.prom';
const metrics = (what: string): string => {
  const text = rig.read(PROM);
  written.push({ what, text });
  return text;
};
/** The value of one sample, by its name and labels as written. */
const sample = (text: string, series: string): string | undefined => text.split('\n').find((l) => l.startsWith(`${series} `))?.slice(series.length + 1);

/** A config rendered from settings.json, and a task that fails when told to: enough for an atomic apply to fail and be undone. */
function nodefile(): void {
  rig.write(
    'Nodefile.ts',
    `import { readFileSync } from 'node:fs';
import type { NodefileApi } from ${JSON.stringify(apiTypes)};
export default (ng: NodefileApi): void => {
  ng.settings({ atomic: true });
  const s = JSON.parse(readFileSync(\`\${ng.dir}/settings.json\`, 'utf8')) as { conf: string; fail: boolean };
  ng.task('conf', { inputs: { conf: ng.value(s.conf) }, outputs: ['out/conf'], run: ['sh', '-c', \`mkdir -p out && echo \${s.conf} > out/conf\`] });
  ng.task('breaks', { inputs: { fail: ng.value(s.fail) }, after: ['conf'], run: async (ctx) => { if (ctx.value('fail')) throw new Error('broken on purpose'); } });
};
`,
  );
}
const settings = (conf: string, fail: boolean): void => void rig.write('settings.json', JSON.stringify({ conf, fail }));

test('no option and no variable: nothing is written, in the state folder or elsewhere', async () => {
  nodefile();
  settings('one', false);
  const plain = await rig.run(['apply']);
  expect(plain.code).toBe(0);
  expect(existsSync(rig.path('.nodegraph', 'metrics.json'))).toBe(false);
  expect(readdirSync(rig.path('metrics'))).toEqual([]);
  // An empty variable is none.
  expect((await rig.run(['status'], { NODEGRAPH_METRICS_FILE: '' })).code).toBe(0);
  expect(existsSync(rig.path('.nodegraph', 'metrics.json'))).toBe(false);
});

test('a folder that does not exist: one error naming it, exit 1, nothing run', async () => {
  settings('two', false);
  const bad = await rig.run(['apply', '--metrics-file', 'nowhere/node.prom']);
  expect(bad.stderr).toBe(`error[usage]: --metrics-file nowhere/node.prom: its folder ${rig.path('nowhere')} does not exist (see nodegraph apply --help)\n`);
  expect(bad.code).toBe(1);
  expect(rig.read('out/conf')).toBe('one\n');
  const fromEnv = await rig.run(['status'], { NODEGRAPH_METRICS_FILE: 'nowhere/node.prom' });
  expect(fromEnv.stderr).toBe(`error[usage]: NODEGRAPH_METRICS_FILE nowhere/node.prom: its folder ${rig.path('nowhere')} does not exist (see nodegraph status --help)\n`);
  expect(fromEnv.code).toBe(1);
  expect(existsSync(rig.path('.nodegraph', 'metrics.json'))).toBe(false);
});

test('apply, a failed atomic apply, status and rollback: outcome, tasks, generation and counters, kept across runs', async () => {
  const before = Date.now() / 1000;
  const applied = await rig.run(['apply', '--metrics-file', PROM]);
  expect(applied.code).toBe(0);
  let m = metrics('apply');
  expect(sample(m, 'nodegraph_generation')).toBe('2');
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="success"}')).toBe('1');
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="rolled-back"}')).toBe('0');
  expect(sample(m, 'nodegraph_last_run_tasks{command="apply",result="ran"}')).toBe('1');
  expect(sample(m, 'nodegraph_last_run_tasks{command="apply",result="up_to_date"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="apply",outcome="success"}')).toBe('1');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="failed-apply"}')).toBe('0');
  const ended = Number(sample(m, 'nodegraph_last_run_timestamp_seconds{command="apply"}'));
  expect(ended).toBeGreaterThanOrEqual(before);
  expect(ended).toBeLessThanOrEqual(Date.now() / 1000);
  expect(Number(sample(m, 'nodegraph_last_run_duration_seconds{command="apply"}'))).toBeGreaterThanOrEqual(0);
  // No status run yet: no tasks by status.
  expect(m).not.toContain('nodegraph_tasks');
  // Readable by node_exporter's own user; no temporary file left beside it.
  expect(statSync(rig.path(PROM)).mode & 0o777).toBe(0o644);
  expect(readdirSync(rig.path('metrics'))).toEqual(['node.prom']);

  settings('three', true);
  const failed = await rig.run(['apply'], { NODEGRAPH_METRICS_FILE: rig.path(PROM) });
  expect(failed.code).toBe(1);
  m = metrics('a failed atomic apply');
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="rolled-back"}')).toBe('1');
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="success"}')).toBe('0');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="failed-apply"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="apply",outcome="success"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="apply",outcome="rolled-back"}')).toBe('1');
  // Rolled back: still at the generation before, settings.json given back as it had it.
  expect(sample(m, 'nodegraph_generation')).toBe('2');
  expect(rig.read('out/conf')).toBe('two\n');
  expect(JSON.parse(rig.read('settings.json'))).toEqual({ conf: 'two', fail: false });

  const status = await rig.run(['status', '--metrics-file', PROM]);
  expect(status.code).toBe(0);
  m = metrics('status');
  expect(sample(m, 'nodegraph_tasks{status="applied"}')).toBe('2');
  expect(sample(m, 'nodegraph_tasks{status="stale"}')).toBe('0');
  expect(sample(m, 'nodegraph_last_run_outcome{command="status",outcome="success"}')).toBe('1');
  // The last apply is still shown, and the counters went on.
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="rolled-back"}')).toBe('1');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="failed-apply"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="status",outcome="success"}')).toBe('1');

  // A change not applied yet: status finds both tasks stale.
  settings('four', false);
  expect((await rig.run(['status', '--metrics-file', PROM])).code).toBe(0);
  m = metrics('status of a change not applied');
  expect(sample(m, 'nodegraph_tasks{status="stale"}')).toBe('1');
  expect(sample(m, 'nodegraph_last_run_outcome{command="status",outcome="unsettled"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="status",outcome="unsettled"}')).toBe('1');

  expect((await rig.run(['apply', '--metrics-file', PROM])).code).toBe(0);
  m = metrics('apply after the fix');
  // Generation 3 is the failed change, kept; this one is 4.
  expect(sample(m, 'nodegraph_generation')).toBe('4');
  expect(sample(m, 'nodegraph_runs_total{command="apply",outcome="success"}')).toBe('2');

  const rolled = await rig.run(['rollback', '--metrics-file', PROM]);
  expect(rolled.stdout).toContain('Generation 5 is current.');
  expect(rolled.code).toBe(0);
  m = metrics('rollback');
  expect(rig.read('out/conf')).toBe('two\n');
  expect(sample(m, 'nodegraph_generation')).toBe('5');
  expect(sample(m, 'nodegraph_last_run_outcome{command="rollback",outcome="success"}')).toBe('1');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="command"}')).toBe('1');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="failed-apply"}')).toBe('1');

  // A Nodefile that does not load: the apply's outcome is an error, the counters go on.
  rig.write('Nodefile.ts', 'export default 3;\n');
  expect((await rig.run(['apply', '--metrics-file', PROM])).code).toBe(1);
  m = metrics('an apply that could not run');
  expect(sample(m, 'nodegraph_last_run_outcome{command="apply",outcome="error"}')).toBe('1');
  expect(sample(m, 'nodegraph_runs_total{command="apply",outcome="error"}')).toBe('1');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="command"}')).toBe('1');
  expect(sample(m, 'nodegraph_generation')).toBe('5');
});

test('a damaged metrics.json: one warning, the counters start again, the state is untouched', async () => {
  nodefile();
  const journal = readFileSync(rig.path('.nodegraph', 'state.jsonl'));
  writeFileSync(rig.path('.nodegraph', 'metrics.json'), '{"format":"nodegraph-metr');
  const status = await rig.run(['status', '--metrics-file', PROM]);
  expect(status.stderr).toBe(`warning: ${rig.path('.nodegraph', 'metrics.json')} cannot be read: the metrics' counters start again from 0\n`);
  const m = metrics('after a damaged metrics.json');
  expect(sample(m, 'nodegraph_runs_total{command="status",outcome="unsettled"}')).toBe('0');
  expect(sample(m, 'nodegraph_rollbacks_total{cause="command"}')).toBe('0');
  expect(readFileSync(rig.path('.nodegraph', 'state.jsonl'))).toEqual(journal);
  // Rewritten whole: the next run reads it without a warning.
  expect(JSON.parse(rig.read('.nodegraph/metrics.json'))).toMatchObject({ format: 'nodegraph-metrics', version: 1 });
  expect((await rig.run(['status', '--metrics-file', PROM])).stderr).toBe('');
});

test('a metrics file that cannot be written is a warning: the run and its exit code stand, no temporary file is left', async () => {
  // A name of 250 bytes is a file's name; its temporary file's (`.<name>.<pid>.tmp`) is too long, whoever runs this.
  const name = `${'m'.repeat(245)}.prom`;
  const status = await rig.run(['status', '--metrics-file', `metrics/${name}`]);
  expect(status.stderr).toMatch(new RegExp(`^warning: ${rig.path('metrics', name)} could not be written: ENAMETOOLONG`));
  expect(status.code).toBe(0);
  expect(readdirSync(rig.path('metrics')).sort()).toEqual(['node.prom']);
});

test('a metrics file is not written over a folder, the state, the Nodefile or a file it did not write: one usage error, nothing changed', async () => {
  mkdirSync(rig.path('metrics', 'taken.prom'));
  rig.write('metrics/notes.txt', 'mine\n');
  const before = { nodefile: rig.read('Nodefile.ts'), notes: rig.read('metrics/notes.txt'), journal: rig.read('.nodegraph/state.jsonl') };
  const refused = [
    ['metrics/taken.prom', 'is a folder'],
    ['Nodefile.ts', 'is the Nodefile'],
    ['.nodegraph/state.jsonl', `is inside nodegraph's state folder ${rig.path('.nodegraph')}`],
    ['metrics/notes.txt', 'exists and is not a metrics file nodegraph wrote'],
  ];
  for (const [file, why] of refused) {
    const status = await rig.run(['status', '--metrics-file', file!]);
    expect(status.code, file).toBe(1);
    expect(status.stderr).toBe(`error[usage]: --metrics-file ${file}: ${rig.path(file!)} ${why}${why!.startsWith('exists') ? ': remove it, or choose another path' : ''} (see nodegraph status --help)\n`);
  }
  expect({ nodefile: rig.read('Nodefile.ts'), notes: rig.read('metrics/notes.txt'), journal: rig.read('.nodegraph/state.jsonl') }).toEqual(before);
  // Its own file it writes again.
  expect((await rig.run(['status', '--metrics-file', PROM])).code).toBe(0);
  expect((await rig.run(['status', '--metrics-file', PROM])).code).toBe(0);
});

test('runs that end at once each count, and a killed run\'s metrics.lock is taken over', async () => {
  const statusRuns = (): number => {
    const runs = (JSON.parse(rig.read('.nodegraph/metrics.json')) as { runs: Record<string, number> }).runs;
    return Object.entries(runs).reduce((sum, [name, n]) => (name.startsWith('status ') ? sum + n : sum), 0);
  };
  const before = statusRuns();
  // A lock left by a run killed while it counted: its pid has exited.
  const dead = spawnSync('true').pid;
  rig.write('.nodegraph/metrics.lock', `${JSON.stringify({ pid: dead, host: hostname(), command: 'nodegraph status', startedAt: new Date().toISOString(), token: 'killed' })}\n`);
  const runs = await Promise.all(Array.from({ length: 6 }, () => rig.run(['status', '--metrics-file', PROM])));
  for (const run of runs) expect(run.stderr).not.toContain('warning');
  expect(statusRuns()).toBe(before + 6);
  expect(existsSync(rig.path('.nodegraph', 'metrics.lock'))).toBe(false);
  metrics('six runs at once');
});

test('promtool check metrics accepts every metrics file written above', (ctx) => {
  const found = spawnSync('sh', ['-c', 'command -v promtool'], { encoding: 'utf8' }).stdout.trim();
  if (found === '') {
    // CI installs it (.ci/run): there, its absence is a failure.
    if (process.env['CI'] === 'true') throw new Error('promtool is not installed (Debian package prometheus), and CI must run this check');
    ctx.skip('promtool is not installed (Debian package prometheus): the metrics files were not checked');
  }
  expect(written.length).toBeGreaterThanOrEqual(6);
  for (const { what, text } of written) {
    const checked = spawnSync(found, ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(`${checked.stdout}${checked.stderr}`, what).toBe('');
    expect(checked.status, what).toBe(0);
  }
});
