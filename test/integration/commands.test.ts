// destroy, stop, saved plans, pools, status, explain, graph, colour.

import { cpSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';
import { valid } from '../support/schemas.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const lines = (stdout: string): { type: string; id?: string; outcome?: string }[] =>
  stdout
    .trim()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { type: string; id?: string; outcome?: string });

// A log every task appends to when it is destroyed, so the order can be read back.
const teardownGraph = `
  const log = (what) => ['sh', '-c', 'echo ' + what + ' >> teardown.log'];
  const shared = ng.task('shared/data', { outputs: ['out/shared'], run: ['touch', 'out/shared'], destroy: log('shared') });
  for (const slot of ['kube1', 'kube2']) {
    const rootfs = ng.task(slot + '/rootfs', { inputs: { shared }, outputs: ['out/' + slot + '-rootfs'], run: ['touch', 'out/' + slot + '-rootfs'], destroy: log(slot + '-rootfs') });
    ng.task(slot + '/service', { inputs: { rootfs }, run: ['true'], stop: log(slot + '-stop'), destroy: log(slot + '-service') });
  }
`;

describe('destroy', () => {
  test('tears down in reverse graph order, runs stop before destroy, removes outputs, forgets the tasks', async () => {
    rig.nodefile(teardownGraph);
    expect((await rig.run(['apply'])).code).toBe(0);
    const result = await rig.run(['destroy', '--yes']);
    expect(result.code).toBe(0);
    const order = rig.read('teardown.log').trim().split('\n');
    expect(order.indexOf('kube1-stop')).toBeLessThan(order.indexOf('kube1-service'));
    expect(order.indexOf('kube1-service')).toBeLessThan(order.indexOf('kube1-rootfs'));
    expect(order.indexOf('kube2-rootfs')).toBeLessThan(order.indexOf('shared'));
    expect(order.at(-1)).toBe('shared');
    expect(existsSync(rig.path('out/shared'))).toBe(false);
    expect(existsSync(rig.path('out/kube1-rootfs'))).toBe(false);
    expect((await rig.run(['plan'])).stdout).toContain('Plan: 5 to create');
  });

  test('after a destroy, plan and status say the task was destroyed, not that it never ran', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] }); ng.task('b', { run: ['true'] });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    expect((await rig.run(['destroy', '--yes', 'a'])).code).toBe(0);
    expect((await rig.run(['plan'])).stdout).toMatch(/^ {2}\+ a\s+create\s+was destroyed\n/m);
    const status = await rig.run(['status', '--json']);
    const tasks = (JSON.parse(status.stdout) as { tasks: { id: string; status: string; reasonDetails: unknown[] }[] }).tasks;
    expect(tasks.find((t) => t.id === 'a')).toMatchObject({ status: 'absent', reasonDetails: [{ kind: 'destroyed' }] });
    expect((await rig.run(['explain', 'a'])).stdout).toMatch(/^ {2}because was destroyed\n {2}not applied since it was destroyed\n/m);
    // Declared again and applied, it is in place; a task never applied still never ran.
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] }); ng.task('b', { run: ['true'] }); ng.task('c', { run: ['true'] });`);
    expect((await rig.run(['plan'])).stdout).toMatch(/^ {2}\+ c\s+create\s+never ran\n/m);
    expect((await rig.run(['apply'])).code).toBe(0);
    expect((await rig.run(['status'])).stdout).toMatch(/^a\s+applied\n/m);
  });

  test('a teardown cut short (an action that fails, a kill -9 mid-stop) leaves its task to be done again, not trusted as applied', async () => {
    rig.nodefile(`
  ng.task('svc', { outputs: ['out/svc'], run: ['sh', '-c', 'echo on > out/svc; echo on > svc.on'], destroy: [['rm', '-f', 'svc.on'], ['false']] });
  ng.task('svc2', { outputs: ['out/svc2'], run: ['sh', '-c', 'echo on > out/svc2; echo on > svc2.on'], stop: [['rm', '-f', 'svc2.on'], ['sleep', '30']] });
`);
    expect((await rig.run(['apply'])).code).toBe(0);
    expect((await rig.run(['destroy', '--yes', 'svc'])).code).toBe(1);
    // The stop's first action has run once svc2.on is gone; the run is killed in its second.
    const stop = rig.spawn(['stop', 'svc2']);
    const gone = Date.now() + 20_000;
    while (existsSync(rig.path('svc2.on')) && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
    stop.kill('SIGKILL');
    await new Promise((r) => stop.once('exit', r));
    const status = await rig.run(['status']);
    expect(status.stdout).toMatch(/svc +failed +last run failed: a destroy was begun and did not finish/);
    expect(status.stdout).toMatch(/svc2 +failed +last run failed: a stop was begun and did not finish/);
    const applied = await rig.run(['apply']);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain('Apply: 2 ran');
    expect([existsSync(rig.path('svc.on')), existsSync(rig.path('svc2.on'))]).toEqual([true, true]);
  });

  test('destroying one slot keeps what the other still needs; the last slot takes it with it', async () => {
    rig.nodefile(teardownGraph);
    await rig.run(['apply']);
    expect((await rig.run(['destroy', '--yes', 'kube2/*'])).code).toBe(0);
    expect(rig.read('teardown.log').trim().split('\n')).toEqual(['kube2-stop', 'kube2-service', 'kube2-rootfs']);
    expect(existsSync(rig.path('out/shared'))).toBe(true);
    expect((await rig.run(['destroy', '--yes', 'kube1/rootfs'])).code).toBe(0);
    expect(rig.read('teardown.log').trim().split('\n').slice(3)).toEqual(['kube1-stop', 'kube1-service', 'kube1-rootfs', 'shared']);
  });

  test('tasks removed from the Nodefile are torn down from the state: by apply, and by destroy without any Nodefile', async () => {
    rig.nodefile(teardownGraph);
    await rig.run(['apply']);
    rig.nodefile(`ng.task('shared/data', { outputs: ['out/shared'], run: ['touch', 'out/shared'], destroy: ['sh', '-c', 'echo shared >> teardown.log'] });`);
    const plan = await rig.run(['plan']);
    expect(plan.stdout).toContain('- kube1/service  destroy  orphan: no longer in the Nodefile');
    expect(plan.stdout).toContain('Plan: 0 to create, 0 to update, 4 to destroy; 1 unchanged.');
    const apply = await rig.run(['apply']);
    expect(apply.code).toBe(0);
    expect(rig.read('teardown.log')).not.toContain('shared');
    const torn = rig.read('teardown.log').trim().split('\n');
    expect(torn).toHaveLength(6);
    // In the plan's order: within each slot, what depends on something is torn down before it.
    for (const slot of ['kube1', 'kube2']) {
      expect(torn.filter((line) => line.startsWith(slot))).toEqual([`${slot}-stop`, `${slot}-service`, `${slot}-rootfs`]);
    }

    rig.write('Nodefile.ts', '');
    const gone = await rig.run(['destroy', '--yes', '-f', 'Elsewhere.ts', '--state-dir', '.nodegraph']);
    expect(gone.code).toBe(0);
    expect(gone.stdout).toContain('Elsewhere.ts does not exist: tearing down from the state alone');
    expect(rig.read('teardown.log').trim().split('\n').at(-1)).toBe('shared');
  });

  test('a Nodefile that no longer loads blocks a teardown until --from-state, which works from the records alone', async () => {
    rig.nodefile(`
      const a = ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });
      ng.task('svc', { after: [a], run: ['true'], stop: ['sh', '-c', 'echo stop >> teardown.log'] });
    `);
    expect((await rig.run(['apply'])).code).toBe(0);
    rig.write('Nodefile.ts', `${rig.read('Nodefile.ts')}\nbroken(\n`);
    for (const mode of ['stop', 'destroy']) {
      const refused = await rig.run(mode === 'stop' ? ['stop'] : ['destroy', '--yes']);
      expect(refused.code, mode).toBe(1);
      expect(refused.stderr, mode).toMatch(new RegExp(`^error\\[nodefile-syntax\\][^]*\\nThe state's records alone can be torn down, without the Nodefile: nodegraph ${mode} --from-state\\n$`));
    }
    expect(rig.exists('teardown.log')).toBe(false);
    expect((await rig.run(['destroy', '--yes', '--from-state', '--traces'])).stderr).toMatch(/^error\[usage\]: --traces finds what the Nodefile's tasks left in place/);
    const stopped = await rig.run(['stop', '--from-state']);
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toContain(`--from-state: tearing down from the state alone, ${rig.path('Nodefile.ts')} not loaded`);
    expect(rig.read('teardown.log')).toBe('stop\n');
    expect((await rig.run(['destroy', '--yes', '--from-state'])).code).toBe(0);
    expect(rig.exists('out/a')).toBe(false);
  });

  test('a destroy in a copy of a project (or a moved one) removes its own outputs, never the original\'s its records name', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a', 'out/dir'], run: { shell: 'mkdir -p out/dir && echo a > out/a && echo x > out/dir/x' } });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    const copy = new Rig('nodegraph-copy-');
    const moved = new Rig('nodegraph-moved-');
    try {
      cpSync(rig.dir, copy.dir, { recursive: true });
      const destroyed = await copy.run(['destroy', '--yes']);
      expect(destroyed.code, destroyed.stderr).toBe(0);
      expect([copy.exists('out/a'), copy.exists('out/dir')]).toEqual([false, false]);
      expect([rig.read('out/a'), rig.read('out/dir/x')]).toEqual(['a\n', 'x\n']);
      rmSync(moved.dir, { recursive: true });
      renameSync(rig.dir, moved.dir);
      expect((await moved.run(['destroy', '--yes'])).code).toBe(0);
      expect([moved.exists('out/a'), moved.exists('out/dir')]).toEqual([false, false]);
    } finally {
      if (!existsSync(rig.dir)) renameSync(moved.dir, rig.dir);
      moved.cleanup();
      copy.cleanup();
    }
  });

  test('a task whose folder an edit of the Nodefile changed is no move: destroy removes what its record names, not the same place here', async () => {
    const elsewhere = new Rig('nodegraph-cwd-');
    try {
      const task = (cwd: string): string =>
        `ng.task('a', { ${cwd}outputs: [${JSON.stringify(elsewhere.path('sub/f'))}], run: { shell: 'mkdir -p ${elsewhere.path('sub')} && echo f > ${elsewhere.path('sub/f')}' } });`;
      rig.nodefile(task(`cwd: ${JSON.stringify(elsewhere.dir)}, `));
      expect((await rig.run(['apply'])).code).toBe(0);
      rig.nodefile(task(''));
      rig.write('sub/f', 'mine\n');
      expect((await rig.run(['destroy', '--yes'])).code).toBe(0);
      expect([elsewhere.exists('sub/f'), rig.read('sub/f')]).toEqual([false, 'mine\n']);
    } finally {
      elsewhere.cleanup();
    }
  });

  test('a task dropped from a moved or copied project is torn down where the project is now', async () => {
    // 'x' makes nothing in the project, so no apply runs it again: its record names where it ran first.
    const body = (dropped: boolean): string => `
      ng.task('keep', { outputs: ['out/k'], run: { shell: 'mkdir -p out && echo k > out/k' } });
      ${dropped ? '' : `ng.task('x', { run: ['true'], destroy: [['sh', '-c', 'pwd > destroyed-in']] });`}`;
    rig.nodefile(body(false));
    expect((await rig.run(['apply'])).code).toBe(0);
    const copy = new Rig('nodegraph-copy-');
    const moved = new Rig('nodegraph-moved-');
    try {
      cpSync(rig.dir, copy.dir, { recursive: true });
      // The copy applied first: 'keep' runs again there, and only a kept generation says where the project was.
      expect((await copy.run(['apply'])).code).toBe(0);
      copy.nodefile(body(true));
      const copied = await copy.run(['apply']);
      expect(copied.code, copied.stdout).toBe(0);
      expect([copy.read('destroyed-in'), rig.exists('destroyed-in')]).toEqual([`${copy.dir}\n`, false]);
      rmSync(moved.dir, { recursive: true });
      renameSync(rig.dir, moved.dir);
      moved.nodefile(body(true));
      const applied = await moved.run(['apply']);
      expect(applied.code, applied.stdout).toBe(0);
      expect(moved.read('destroyed-in')).toBe(`${moved.dir}\n`);
    } finally {
      if (!existsSync(rig.dir)) renameSync(moved.dir, rig.dir);
      moved.cleanup();
      copy.cleanup();
    }
  });

  test('two Nodefiles in one folder: applying one refuses to destroy what only the other declares, until that one is gone', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: { shell: 'mkdir -p out && echo a > out/a' } });`, 'a.ts');
    rig.nodefile(`ng.task('b', { outputs: ['out/b'], run: { shell: 'mkdir -p out && echo b > out/b' } });`, 'b.ts');
    expect((await rig.run(['apply', '-f', 'a.ts'])).code).toBe(0);
    const said =
      `the state was last applied from a.ts, which is still there: applying b.ts would destroy the task only a.ts declares (a). ` +
      'Give b.ts a state of its own (--state-dir), or remove a.ts if b.ts replaces it';
    const state = readFileSync(rig.path('.nodegraph/state.jsonl'));
    const plan = await rig.run(['plan', '-f', 'b.ts']);
    expect(plan.stdout).toContain(`! apply would refuse this plan: ${said}\n`);
    const refused = await rig.run(['apply', '-f', 'b.ts']);
    expect([refused.code, refused.stderr]).toEqual([1, `error[orphans-of-another-nodefile]: ${said}\n`]);
    const destroy = await rig.run(['destroy', '--yes', '-f', 'b.ts']);
    expect([destroy.code, destroy.stderr]).toEqual([1, `error[orphans-of-another-nodefile]: ${said.replace('applying', 'destroying with')}\n`]);
    expect([rig.read('out/a'), rig.exists('out/b')]).toEqual(['a\n', false]);
    expect(readFileSync(rig.path('.nodegraph/state.jsonl'))).toEqual(state);
    // A state of its own for b.ts; and once a.ts is gone (b.ts replaces it), its tasks are orphans as any.
    expect((await rig.run(['apply', '-f', 'b.ts', '--state-dir', '.nodegraph-b'])).code).toBe(0);
    rmSync(rig.path('a.ts'));
    const replaced = await rig.run(['apply', '-f', 'b.ts']);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(rig.exists('out/a')).toBe(false);
    // A rollback to a.ts's generation gives a.ts back and takes b.ts's task: asked for, not refused.
    const back = await rig.run(['rollback', '1', '-f', 'b.ts']);
    expect(back.code, back.stderr).toBe(0);
    expect([rig.read('out/a'), rig.exists('out/b'), rig.exists('a.ts')]).toEqual(['a\n', false, true]);
  });

  test('without a terminal and without --yes, destroy changes nothing', async () => {
    rig.nodefile(teardownGraph);
    await rig.run(['apply']);
    const result = await rig.run(['destroy']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('destroy needs confirmation: run it on a terminal, or pass --yes\nerror[not-confirmed]: not confirmed: nothing was changed\n');
    expect(existsSync(rig.path('teardown.log'))).toBe(false);
  });

  test('stop runs stop actions in reverse order and keeps files; the next apply starts what it stopped, checked or not', async () => {
    rig.nodefile(`
      ng.task('conf', { outputs: ['out/conf'], run: ['touch', 'out/conf'] });
      ng.task('svc', { after: ['conf'], run: { shell: 'touch out/up' }, version: '1', stop: ['rm', 'out/up'], verbs: { create: 'start', update: 'restart' } });
      ng.task('checked', { after: ['conf'], run: { shell: 'touch out/checked' }, check: ['test', '-e', 'out/checked'], stop: ['rm', 'out/checked'] });
    `);
    await rig.run(['apply']);
    const stop = await rig.run(['stop']);
    expect(stop.code).toBe(0);
    // Only the two tasks with something to stop are stopped, and counted.
    expect(stop.stdout).toMatch(/Stop: 2 stopped, 0 failed, 0 canceled, 0 kept/);
    expect(stop.stdout).not.toContain('conf');
    expect(existsSync(rig.path('out/up'))).toBe(false);
    expect(existsSync(rig.path('out/conf'))).toBe(true);
    expect((await rig.run(['status'])).stdout).toMatch(/^conf\s+applied\s*\nsvc\s+stopped\s+stopped by nodegraph stop\nchecked\s+stopped\s+stopped by nodegraph stop\nStatus: 3 tasks: 1 applied, 2 stopped\.\nGeneration 1 is current\.\n$/);
    const plan = await rig.run(['plan']);
    // Started again, not restarted: the verb of its first run.
    expect(plan.stdout).toMatch(/~ svc\s+start\s+stopped by nodegraph stop\n/);
    expect(plan.stdout).toMatch(/~ checked\s+update\s+stopped by nodegraph stop\n/);
    expect(plan.stdout).toContain('Plan: 0 to create, 2 to update, 0 to destroy; 1 unchanged.');
    await rig.run(['apply']);
    expect(existsSync(rig.path('out/up'))).toBe(true);
    expect(existsSync(rig.path('out/checked'))).toBe(true);
    expect((await rig.run(['plan'])).stdout).toBe('No changes: 3 tasks up to date.\n');
  });
});

describe('saved plans', () => {
  test('apply NAME is a task when a file NAME exists that is not a saved plan (a task named after its output)', async () => {
    rig.write('in.conf', 'listen 80;\n');
    rig.nodefile(`ng.task('nginx.conf', { inputs: { src: ng.file('in.conf') }, outputs: ['nginx.conf'], run: ['cp', 'in.conf', 'nginx.conf'] });`);
    expect((await rig.run(['apply', 'nginx.conf'])).code).toBe(0);
    rig.write('in.conf', 'listen 8080;\n');
    const again = await rig.run(['apply', 'nginx.conf']);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    expect(rig.read('nginx.conf')).toBe('listen 8080;\n');
  });

  test('apply PLANFILE applies it while nothing changed, and refuses once anything did', async () => {
    rig.write('in.txt', 'one\n');
    rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
    const saved = await rig.run(['plan', '--out', 'plan.json']);
    expect(saved.stdout).toContain('Saved the plan to plan.json');
    expect((await rig.run(['apply', 'plan.json'])).code).toBe(0);
    expect(rig.read('out/copy')).toBe('one\n');

    rig.write('in.txt', 'two\n');
    await rig.run(['plan', '--out', 'plan.json']);
    rig.write('in.txt', 'three\n');
    const stale = await rig.run(['apply', 'plan.json']);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toBe(
      `error[plan-stale]: the saved plan ${rig.path('plan.json')} no longer matches; make a new one with \`nodegraph plan --out\`:\n  - task copy: input src (in.txt) changed\n`,
    );
    expect(rig.read('out/copy')).toBe('one\n');
  });

  test('a plan made before another apply is refused: the state changed', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] }); ng.task('b', { outputs: ['out/b'], run: ['touch', 'out/b'] });`);
    await rig.run(['plan', '--out', 'plan.json']);
    await rig.run(['apply', 'a']);
    const stale = await rig.run(['apply', '--plan', 'plan.json']);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain('  - the state changed (another apply or destroy ran)');
  });

  test('a saved plan of another Nodefile than -f names, or with a field that is not what plan --out writes, is refused: nothing runs', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });`);
    rig.nodefile(`ng.task('b', { outputs: ['out/b'], run: ['touch', 'out/b'] });`, 'other/Nodefile.ts');
    expect((await rig.run(['plan', '--out', 'plan.json'])).code).toBe(0);
    const other = await rig.run(['apply', '--plan', 'plan.json', '-f', 'other/Nodefile.ts']);
    expect(other.code).toBe(1);
    expect(other.stderr).toBe(`error[usage]: the saved plan ${rig.path('plan.json')} is of ${rig.path('Nodefile.ts')}, not of ${rig.path('other/Nodefile.ts')} (see nodegraph apply --help)\n`);
    const saved = JSON.parse(rig.read('plan.json')) as Record<string, unknown>;
    rig.write('plan.json', JSON.stringify({ ...saved, tasks: null }));
    const damaged = await rig.run(['apply', '--plan', 'plan.json']);
    expect(damaged.code).toBe(1);
    expect(damaged.stderr).toBe(`error[plan-file-invalid]: ${rig.path('plan.json')} is not a usable plan: its tasks is not what plan --out writes\n`);
    const missing = await rig.run(['apply', '--plan', 'gone.json']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`error[plan-file-invalid]: ${rig.path('gone.json')} is not a usable plan: there is no such file (plan --out FILE writes one)\n`);
    expect(rig.exists('out/a') || rig.exists('other/out/b')).toBe(false);
  });

  test('plan --json is a versioned document', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });`);
    const result = await rig.run(['plan', '--json', '--detailed-exitcode']);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({
      format: 'nodegraph-plan-json',
      version: 1,
      entries: [{ id: 'a', action: 'create', verb: 'create', reasons: ['never ran'], reasonDetails: [{ kind: 'never-ran' }] }],
      counts: { create: 1, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, stop: 0, unchanged: 0 },
      generation: { current: null, atomic: null, interrupted: null, underWay: null, orphanedTransaction: null, outside: [] },
    });
  });
});

describe('scheduling', () => {
  test('a pool of depth 1 never runs two of its tasks at once; -j runs the rest in parallel', async () => {
    // Each pooled task holds a marker while it runs and fails if another one's is there.
    rig.nodefile(`
      ng.pool('serial', 1);
      for (let i = 0; i < 4; i++) {
        ng.task('pooled/' + i, { pool: 'serial', outputs: ['out/p' + i],
          run: { shell: 'mkdir running.lock || exit 9; sleep 0.2; rmdir running.lock; touch out/p' + i } });
      }
    `);
    const result = await rig.run(['apply', '-j', '4']);
    expect(result.code).toBe(0);
    rig.nodefile(`
      for (let i = 0; i < 4; i++) {
        ng.task('free/' + i, { outputs: ['out/f' + i], run: { shell: 'mkdir running.lock 2>/dev/null && sleep 0.5 && rmdir running.lock; touch out/f' + i + '; ls -d running.lock >> seen 2>/dev/null; true' } });
      }
    `);
    await rig.run(['apply', '-j', '4']);
    // Without the pool some task saw another one's marker.
    expect(existsSync(rig.path('seen')) && readFileSync(rig.path('seen'), 'utf8').includes('running.lock')).toBe(true);
  });
});

describe('inspection', () => {
  test('with no state, status calls a task a trace only when it has something to tear down and finds it in place', async () => {
    rig.nodefile(`
      ng.task('precondition', { run: ['true'], check: ['true'] });
      ng.task('service', { run: ['true'], check: ['true'], stop: ['true'] });
      ng.task('shared', { outputs: ['out/shared'], removeOutputs: false, run: ['touch', 'out/shared'] });
      ng.task('made', { outputs: ['out/made'], run: ['touch', 'out/made'] });
    `);
    rig.write('out/shared', 'x\n');
    rig.write('out/made', 'x\n');
    const status = await rig.run(['status']);
    expect(status.stdout).toMatch(/^precondition\s+absent\s/m);
    expect(status.stdout).toMatch(/^service\s+trace\s/m);
    expect(status.stdout).toMatch(/^shared\s+absent\s/m);
    expect(status.stdout).toMatch(/^made\s+trace\s/m);
    expect(status.stdout).toContain('Status: 4 tasks: 2 absent, 2 trace.');
  });

  test('status, explain and graph', async () => {
    rig.write('in.txt', 'x\n');
    rig.nodefile(`
      const a = ng.task('a', { inputs: { src: ng.file('in.txt') }, outputs: ['out/a'], run: ['cp', 'in.txt', 'out/a'] });
      ng.task('b', { inputs: { a }, outputs: ['out/b'], run: ['cp', 'out/a', 'out/b'] });
      ng.task('c', { after: ['b'], run: ['true'] });
    `);
    expect((await rig.run(['status'])).stdout).toBe('a  absent   never ran\nb  absent   never ran\nc  absent   never ran\nStatus: 3 tasks: 3 absent.\nNo generation recorded yet.\n');
    await rig.run(['apply']);
    writeFileSync(rig.path('out/b'), 'changed\n');
    expect((await rig.run(['status'])).stdout).toBe(`a  applied\nb  drifted  output ${rig.path('out/b')} modified outside nodegraph\nc  applied\nStatus: 3 tasks: 2 applied, 1 drifted.\nGeneration 1 is current.\n`);
    const explain = await rig.run(['explain', 'b']);
    expect(explain.stdout).toMatch(/^b: update\n  because output \S+out\/b modified outside nodegraph\n  last applied \S+ \(ok, \d+ms\)\n  upstream outputs \(recorded → current\):\n    a\s+[0-9a-f]{8} → [0-9a-f]{8}  same\n  outputs \(recorded → current\):\n    out\/b\s+[0-9a-f]{8} → [0-9a-f]{8}  differs\n$/);
    // A task that reads nothing says so, not an empty heading.
    expect((await rig.run(['explain', 'c'])).stdout).toMatch(/^c: up to date\n  last applied \S+ \(ok, \d+ms\)\n  inputs: none\n  runs after \(order only\): b\n$/);
    const json = JSON.parse((await rig.run(['explain', 'b', '--json'])).stdout) as Record<string, unknown>;
    const hash = expect.stringMatching(/^sha256:[0-9a-f]{64}$/);
    expect(json).toEqual({
      format: 'nodegraph-explain',
      version: 1,
      id: 'b',
      action: 'drift',
      verb: 'update',
      reasons: [`output ${rig.path('out/b')} modified outside nodegraph`],
      reasonDetails: [{ kind: 'output-modified', path: rig.path('out/b') }],
      lastApplied: { startedAt: expect.any(String), status: 'ok', durationMs: expect.any(Number) },
      inputs: [],
      upstream: [{ id: 'a', recorded: hash, current: hash }],
      after: [],
      outputs: [{ path: rig.path('out/b'), recorded: hash, current: hash }],
      check: null,
    });
    const outputs = json['outputs'] as { recorded: string; current: string }[];
    expect(outputs[0]!.recorded).not.toBe(outputs[0]!.current);
    expect((await rig.run(['graph'])).stdout).toContain('  "a";\n  "b";\n  "c";\n  "a" -> "b" [label="a"];\n  "b" -> "c" [style=dashed];\n');
    // --json, as every command takes it, is the JSON document; with another --format, a usage error.
    expect((await rig.run(['graph', '--json'])).stdout).toBe((await rig.run(['graph', '--format', 'json'])).stdout);
    expect((await rig.run(['graph', '--json', '--format', 'dot'])).code).toBe(1);
    expect((await rig.run(['graph', '--format', 'mermaid'])).stdout).toBe(
      [
        'flowchart LR',
        '  t0["a"]',
        '  t1["b"]',
        '  t2["c"]',
        '  t0 -->|"a"| t1',
        '  t1 -.-> t2',
        // The legend as nodes and edges a renderer draws, not a comment it leaves out.
        '  subgraph legend',
        '    legend_up["upstream"]',
        '    legend_in["consumes it (trigger)"]',
        '    legend_after["runs after it (order only)"]',
        '    legend_up -->|"input"| legend_in',
        '    legend_up -.-> legend_after',
        '  end',
        '',
      ].join('\n'),
    );
  });

  test('status, explain and plan say a warning on stderr, their output as it was', async () => {
    rig.nodefile(`ng.task('a', { run: ['true'] });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    for (const command of [['status'], ['explain', 'a'], ['plan']]) {
      const clean = await rig.run(command);
      writeFileSync(rig.path('.nodegraph/hashcache'), 'garbage\n');
      const warned = await rig.run(command);
      expect(warned.stderr, command[0]).toBe(`warning: ignoring the hash cache ${rig.path('.nodegraph/hashcache')}: not a nodegraph hash cache; files will be hashed again\n`);
      expect(warned.stdout.replace(/\d+ms/g, ''), command[0]).toBe(clean.stdout.replace(/\d+ms/g, ''));
    }
  });

  test('a project copied elsewhere with its state: plan says its outputs are not the ones recorded, not that they were modified', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: { shell: 'mkdir -p out && echo a > out/a' } });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    const copy = new Rig('nodegraph-copy-');
    try {
      cpSync(rig.dir, copy.dir, { recursive: true });
      const plan = await copy.run(['plan']);
      expect(plan.stdout).toContain(`  ! a  update  output ${copy.path('out/a')} is not one its last run recorded (it ran in ${rig.dir})\n`);
      expect(plan.stdout).not.toContain('modified outside');
      const json = JSON.parse((await copy.run(['plan', '--json'])).stdout) as { entries: { reasonDetails: unknown[] }[] };
      valid('plan', json);
      expect(json.entries[0]!.reasonDetails).toEqual([{ kind: 'output-unrecorded', path: copy.path('out/a'), ranIn: rig.dir }]);
    } finally {
      copy.cleanup();
    }
  });

  test('a project moved or copied with its state re-runs what made its outputs, and nothing downstream, until something changes', async () => {
    // 'svc' stands for a service: its run is a restart, counted outside the project.
    const starts = new Rig('nodegraph-starts-');
    rig.nodefile(`
      const conf = ng.task('conf', { inputs: { src: ng.file('conf.in') }, outputs: ['out/conf'], run: { shell: 'mkdir -p out && cp conf.in out/conf' } });
      ng.task('svc', { inputs: { conf }, run: { shell: 'echo start >> ${starts.path('starts')}' } });`);
    rig.write('conf.in', 'one\n');
    expect((await rig.run(['apply'])).code).toBe(0);
    const moved = new Rig('nodegraph-moved-');
    const again = new Rig('nodegraph-again-');
    const copy = new Rig('nodegraph-copy-');
    try {
      cpSync(rig.dir, copy.dir, { recursive: true });
      rmSync(moved.dir, { recursive: true });
      rmSync(again.dir, { recursive: true });
      // Moved, and moved on: what dependents see of an output does not depend on where the project is.
      for (const [from, to] of [[rig, moved], [moved, again], [again, moved]] as const) {
        renameSync(from.dir, to.dir);
        const apply = await to.run(['apply']);
        expect(apply.code, apply.stderr).toBe(0);
        expect(apply.stdout).toContain('✔ conf');
        expect(apply.stdout).toContain('svc up to date (what it consumes came out unchanged)');
        expect(apply.stdout).not.toContain('kept');
        expect((await to.run(['plan'])).stdout).toContain('No changes');
      }
      const copied = await copy.run(['apply']);
      expect(copied.code, copied.stderr).toBe(0);
      expect(copied.stdout).toContain('svc up to date (what it consumes came out unchanged)');
      expect(starts.read('starts')).toBe('start\n');
      moved.write('conf.in', 'two\n');
      expect((await moved.run(['apply'])).code).toBe(0);
      expect(starts.read('starts')).toBe('start\nstart\n');
    } finally {
      if (!existsSync(rig.dir)) renameSync(existsSync(moved.dir) ? moved.dir : again.dir, rig.dir);
      moved.cleanup();
      again.cleanup();
      copy.cleanup();
      starts.cleanup();
    }
  });

  test('FORCE_COLOR colours, NO_COLOR does not', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });`);
    expect((await rig.run(['plan'], { FORCE_COLOR: '1' })).stdout).toContain('\x1b[32m+\x1b[39m');
    expect((await rig.run(['plan'], { NO_COLOR: '1' })).stdout).not.toContain('\x1b[');
  });

  test('--version and --help', async () => {
    expect((await rig.run(['--version'])).stdout).toMatch(/^nodegraph \d+\.\d+\.\d+\n$/);
    expect((await rig.run(['apply', '--help'])).stdout).toContain('Usage: nodegraph apply [options] [TARGET...]');
  });

  test('--json streams events as JSON lines', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });`);
    const result = await rig.run(['apply', '--json']);
    expect(lines(result.stdout).map((e) => `${e.type}${e.id === undefined ? '' : ` ${e.id}`}${e.outcome === undefined ? '' : ` ${e.outcome}`}`)).toEqual([
      'plan',
      'task-start a',
      'task-done a ran',
      'summary',
    ]);
    // The plan event carries the entries and counts, as `plan --json` does.
    expect(lines(result.stdout)[0]).toEqual({
      v: 1,
      type: 'plan',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      plan: {
        entries: [{ id: 'a', action: 'create', verb: 'create', reasons: ['never ran'], reasonDetails: [{ kind: 'never-ran' }] }],
        counts: { create: 1, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, stop: 0, unchanged: 0 },
      },
    });
  });
});
