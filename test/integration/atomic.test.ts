// Atomic apply, for real: a failing task, a health task that stops holding,
// and Ctrl-C each undo the apply — outputs, preserved files (by SHA-256, mode
// and owner), and a running start-stop-daemon service back on its previous
// configuration — and the generations that make it possible; a state folder
// that stops taking writes mid-apply is one clear error, undone by the next.

import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { applyNodefile } from '../../src/apply.ts';
import { planNodefile } from '../../src/operations.ts';
import { palette } from '../../src/report/color.ts';
import { renderFailure } from '../../src/report/diagnostic.ts';
import { Rig, alive, cli, collect, until } from '../support/rig.ts';
import { describeTree, makeSharedTree } from '../support/tree.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(async () => {
  // Whatever a failed assertion left running goes.
  await rig.run(['destroy', '--yes', '--json']);
  rig.cleanup();
});

const SSD = '/sbin/start-stop-daemon';

/** A node in miniature: a rendered config, a service that runs with it, a task that scribbles on the shared files, and one that can be made to fail. */
function nodefile(extra = ''): void {
  rig.write('svc.sh', '#!/bin/sh\ncp "$1" "$2"\nexec sleep 3600\n');
  chmodSync(rig.path('svc.sh'), 0o755);
  rig.nodefile(`
  const { readFileSync } = process.getBuiltinModule('node:fs');
  const s = JSON.parse(readFileSync(ng.dir + '/settings.json', 'utf8'));
  ng.preserve('shared', 'absent-before');
  const pid = ng.dir + '/run/svc.pid';
  const status = [${JSON.stringify(SSD)}, '--status', '--pidfile', pid];
  const stop = [${JSON.stringify(SSD)}, '--stop', '--pidfile', pid, '--remove-pidfile', '--retry', 'TERM/5/KILL/5', '--oknodo'];
  const settings = ng.task('settings', { inputs: { file: ng.file('settings.json') }, run: () => {} });
  const conf = ng.task('conf', { inputs: { v: ng.value(s.conf), settings }, outputs: ['out/svc.conf'], run: async (ctx) => { await ctx.writeIfChanged('out/svc.conf', String(ctx.value('v'))); } });
  ng.task('svc', {
    inputs: { conf }, check: status, stop: [stop],
    run: async (ctx) => {
      await ctx.exec(stop);
      await ctx.exec(['mkdir', '-p', ng.dir + '/run']);
      await ctx.exec([${JSON.stringify(SSD)}, '--start', '--background', '--make-pidfile', '--pidfile', pid, '--startas', ng.dir + '/svc.sh', '--', ng.dir + '/out/svc.conf', ng.dir + '/run/loaded']);
      await ctx.exec(['sleep', '0.2']);
      await ctx.exec(status);
    },
  });
  ng.task('scribble', {
    inputs: { v: ng.value(s.scribble) },
    // The new version resets the shared identity, as a new slot's kubelet bootstraps afresh; the first leaves it alone.
    run: async (ctx) => {
      if (ctx.value('v') === 1) return;
      const fs = process.getBuiltinModule('node:fs');
      fs.writeFileSync(ng.dir + '/shared/pki/client.pem', 'identity-' + ctx.value('v') + '\\n');
      fs.writeFileSync(ng.dir + '/shared/new-file', 'x');
      fs.chmodSync(ng.dir + '/shared/kubeconfig', 0o666);
      fs.rmSync(ng.dir + '/shared/current.pem');
      fs.mkdirSync(ng.dir + '/absent-before', { recursive: true });
    },
  });
  if (s.extra) ng.task('extra', { outputs: ['out/extra'], run: ['touch', 'out/extra'] });
  ng.task('breaks', { inputs: { fail: ng.value(s.fail) }, after: ['svc', 'scribble'], run: async (ctx) => { if (ctx.value('fail')) throw new Error('broken on purpose'); } });
  ${extra}`);
}

function settings(s: { conf: string; scribble: number; fail: boolean; extra?: boolean }): void {
  writeFileSync(rig.path('settings.json'), `${JSON.stringify(s)}\n`);
}

/** A wall clock (EngineOptions.now) that moves only when the engine sleeps on it (EngineOptions.sleep), and by how much it has. */
function movingClock(): { now: () => bigint; sleep: (ms: number) => Promise<void>; slept: () => number } {
  const start = BigInt(Date.now()) * 1_000_000n;
  let slept = 0;
  return {
    now: () => start + BigInt(slept) * 1_000_000n,
    sleep: async (ms) => {
      slept += ms;
    },
    slept: () => slept,
  };
}

const svcPid = (): number => Number(readFileSync(rig.path('run/svc.pid'), 'utf8'));

async function firstApply(): Promise<{ shared: Record<string, string>; pid: number }> {
  makeSharedTree(rig.path('shared'));
  settings({ conf: 'one', scribble: 1, fail: false });
  nodefile();
  const first = await rig.run(['apply', '--atomic']);
  expect(first.stderr).toBe('');
  expect(first.code).toBe(0);
  expect(first.stdout).toContain('generation 1 is current');
  // The preserved files as a kubelet would leave them: what the rollback must give back.
  makeSharedTreeFresh();
  rmSync(rig.path('absent-before'), { recursive: true, force: true });
  return { shared: describeTree(rig.path('shared')), pid: svcPid() };
}

function makeSharedTreeFresh(): void {
  rmSync(rig.path('shared'), { recursive: true, force: true });
  makeSharedTree(rig.path('shared'));
}

describe('an atomic apply that fails is undone', () => {
  test('a failing task: outputs, preserved files (SHA-256, modes, owners) and the running service are as before, and the edit is kept as a failed generation', async () => {
    const before = await firstApply();
    expect(readFileSync(rig.path('run/loaded'), 'utf8')).toBe('one');
    const settingsBefore = rig.read('settings.json');

    settings({ conf: 'two', scribble: 2, fail: true, extra: true });
    const plan = await rig.run(['plan', '--atomic']);
    expect(plan.stdout).toContain(`Atomic: preserves shared, absent-before; if a task fails or a check fails after it, it falls back to generation 1.`);
    const failed = await rig.run(['apply', '--atomic']);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe(
      'error[atomic-apply-failed]: breaks failed: rolled back to generation 1, and the rollback succeeded; the failed change is kept as generation 2 (`nodegraph rollback 2` applies it again)\n',
    );
    // The service runs again, on its previous configuration; what the apply created is gone; the preserved paths are as they were.
    expect(readFileSync(rig.path('run/loaded'), 'utf8')).toBe('one');
    expect(alive(svcPid())).toBe(true);
    expect(svcPid()).not.toBe(before.pid);
    expect(rig.read('out/svc.conf')).toBe('one');
    expect(rig.exists('out/extra')).toBe(false);
    expect(describeTree(rig.path('shared'))).toEqual(before.shared);
    expect(rig.exists('absent-before')).toBe(false);
    expect(rig.read('settings.json')).toBe(settingsBefore);
    expect((await rig.run(['plan', '--detailed-exitcode'])).code).toBe(0);

    const listed = await rig.run(['generations']);
    expect(listed.stdout).toMatch(/^\* +1 +\S+ +files: Nodefile\.ts, settings\.json; ran: settings, scribble, conf and 2 more\n {2} +2 +\S+ failed, rolled back +files: settings\.json\n$/);
    // The edit is not lost: rollback 2 applies it again (and, still broken, is undone again).
    const again = await rig.run(['rollback', '2']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('error[atomic-apply-failed]: breaks failed: rolled back to generation 1, and the rollback succeeded');
    expect(readFileSync(rig.path('run/loaded'), 'utf8')).toBe('one');
  });

  test('a health task that stops passing inside its stable window rolls the apply back, on the clock the engine is given', async () => {
    // A rendered config and its health: after a change, healthy for three probes, then not; the stable window (5 s) catches it.
    rig.nodefile(`
    const fs = process.getBuiltinModule('node:fs');
    const conf = fs.readFileSync(ng.dir + '/conf', 'utf8');
    const probes = ng.dir + '/out/probes';
    ng.task('render', { inputs: { v: ng.value(conf) }, outputs: ['out/conf'], run: async (ctx) => { await ctx.writeIfChanged('out/conf', conf); } });
    ng.task('health', {
      inputs: { v: ng.value(conf) },
      after: ['render'],
      run: () => fs.writeFileSync(probes, '0'),
      check: () => {
        const n = Number(fs.readFileSync(probes, 'utf8')) + 1;
        fs.writeFileSync(probes, String(n));
        return conf === 'one' || n <= 3 || 'the service stopped answering';
      },
      health: { within: '10s', stable: '5s' },
    });`);
    rig.write('conf', 'one');
    // The health poll waits on this clock, which moves only when it sleeps: its 5 s windows take no time.
    const clock = movingClock();
    const atomic = { nodefile: rig.path('Nodefile.ts'), atomic: true, now: clock.now, sleep: clock.sleep };
    expect((await applyNodefile(atomic)).ok).toBe(true);
    // Generation 1's health held for its 5 s: a probe each 0.5 s.
    expect(clock.slept()).toBe(5000);
    rig.write('conf', 'two');
    const failed = await applyNodefile(atomic);
    if (failed.ok) throw new Error('the unhealthy apply was kept');
    expect(failed.error.map((f) => renderFailure(f, rig.dir, palette(false)))).toEqual([
      'error[atomic-apply-failed]: health is not healthy: its check failed 1.0 s into the 5s it must keep passing: the service stopped answering: rolled back to generation 1, and the rollback succeeded; the failed change is kept as generation 2 (`nodegraph rollback 2` applies it again)',
    ]);
    // Three probes passed (at 0, 0.5 and 1 s), the fourth failed; then generation 1 is back, and healthy for its 5 s.
    expect(clock.slept()).toBe(5000 + 1000 + 5000);
    expect([rig.read('conf'), rig.read('out/conf')]).toEqual(['one', 'one']);
    // Nothing left to do, planned in this process as the applies were: Vitest's transform gives the
    // Nodefile's functions other text, so other definitions, than the CLI's Node does.
    const plan = await planNodefile({ nodefile: atomic.nodefile });
    if (!plan.ok) throw new Error(JSON.stringify(plan.error));
    expect([...plan.value.plan].filter((e) => e.action !== 'unchanged').map((e) => e.id)).toEqual([]);
  });

  test('Ctrl-C rolls back; a second Ctrl-C leaves the transaction for the next run, which rolls it back first', async () => {
    const before = await firstApply();
    nodefile(`ng.task('slow', { inputs: { v: ng.value(s.conf) }, after: ['svc'], run: async (ctx) => { if (ctx.value('v') === 'one') return; process.getBuiltinModule('node:fs').writeFileSync(ng.dir + '/run/slow-started', ''); await ctx.exec(['sleep', '30']); } });`);
    expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
    for (const presses of [1, 2]) {
      rmSync(rig.path('run/slow-started'), { force: true });
      settings({ conf: 'two', scribble: 2, fail: false });
      const child = rig.spawn(['apply', '--atomic']);
      const output = collect(child);
      // Its exit, not the close of its pipes: a second Ctrl-C leaves the task's sleep holding them.
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      // The second press inside the rollback, as soon as it says it began (its phase is recorded before
      // that line); generation 2's svc then takes 0.2 s to start again, so the press lands before the end.
      let said = '';
      let pressed = false;
      child.stdout?.on('data', (d: Buffer) => {
        said += d.toString();
        if (presses === 2 && !pressed && said.includes(' rollback: ')) {
          pressed = true;
          child.kill('SIGINT');
        }
      });
      await until(() => existsSync(rig.path('run/slow-started')));
      child.kill('SIGINT');
      expect(await exited).toBe(130);
      if (presses === 1) {
        expect((await output).stderr).toContain('error[atomic-apply-failed]: the apply was interrupted: rolled back to generation 2, and the rollback succeeded');
      } else {
        expect(rig.exists('.nodegraph/transaction.json')).toBe(true);
        expect((await rig.run(['status'])).stdout).toContain('an interrupted atomic apply from generation 2 to 4 (rollback');
        const plan = await rig.run(['plan']);
        expect(plan.stdout).toMatch(/^! an interrupted atomic apply from generation 2 will be rolled back by the next apply/);
        expect((await rig.run(['destroy', '--yes'])).stderr).toMatch(/^error\[transaction-pending\]/);
        const recovered = await rig.run(['apply']);
        expect(recovered.stdout).toContain('an interrupted atomic apply from generation 2 to 4: rolling it back first');
        expect(recovered.code).toBe(0);
      }
      expect(readFileSync(rig.path('run/loaded'), 'utf8')).toBe('one');
      expect(alive(svcPid())).toBe(true);
      expect(describeTree(rig.path('shared'))).toEqual(before.shared);
      expect((await rig.run(['plan', '--detailed-exitcode'])).code).toBe(0);
      makeSharedTreeFresh();
    }
  }, 120_000);
});

describe('the state folder turned read-only while an atomic apply runs (as a full disk would leave it)', () => {
  // A task seals .nodegraph under a read-only bind mount, in a mount namespace of the test's own: the
  // journal, open already, still takes its records; transaction.json, written anew each step, cannot be.
  /** `v` copies v.txt to out/v; `seal` seals the state folder once v.txt says 2, by its run, or by its check the second time that sees out/v say 2 (the first is the check after its run). */
  const sealed = (how: 'run' | 'run, then fail' | 'check'): void => {
    rig.write('v.txt', '1\n');
    rig.write('seal.sh', `#!/bin/sh
[ "$(cat "$1")" = 2 ] && [ ! -e sealed ] || exit 0
if [ "$2" = check ] && [ ! -e checked ]; then touch checked; exit 0; fi
touch sealed
mount --bind .nodegraph .nodegraph && mount -o remount,bind,ro .nodegraph || exit 9
exit "$3"
`);
    const action = how === 'check' ? "run: ['true'], check: ['sh', 'seal.sh', 'out/v', 'check', '0']" : `run: ['sh', 'seal.sh', 'v.txt', 'run', '${how === 'run' ? 0 : 1}']`;
    rig.nodefile(`
    ng.settings({ atomic: true });
    const v = ng.task('v', { inputs: { v: ng.file('v.txt') }, outputs: ['out/v'], run: { shell: 'cp v.txt out/v' } });
    ng.task('seal', { inputs: { v: ng.file('v.txt') }, after: [v], ${action} });`);
  };
  const script = `
    "$@" apply > /dev/null || exit 99
    echo 2 > v.txt
    "$@" apply; echo "exit $?"
    umount .nodegraph || exit 98
    "$@" apply; echo "again $?"`;
  const run = (): { stdout: string; stderr: string } => {
    const got = spawnSync('unshare', ['-rm', 'sh', '-c', script, 'sh', process.execPath, cli], { cwd: rig.dir, encoding: 'utf8', env: { ...process.env, CI: '1', NO_COLOR: '1' } });
    expect(got.status).toBe(0);
    return got;
  };

  test('its health step cannot be recorded: one error saying so, and the next apply rolls the change back', () => {
    sealed('run');
    const got = run();
    expect(got.stdout).toContain('\nexit 1\n');
    expect(got.stderr).toMatch(
      /^error\[state-dir-unwritable\]: cannot write to the state folder \S+\/\.nodegraph: transaction\.json: read-only file system \(EROFS\); the apply stopped before its health check, and the next apply rolls the change back \(`apply --continue` finishes it\)\n/,
    );
    expect(got.stderr).not.toMatch(/^\s+at /m);
    expect(got.stdout).toContain('an interrupted atomic apply from generation 1 to 2: rolling it back first');
    expect(got.stdout).toMatch(/\nagain 0\n$/);
    expect(rig.read('v.txt')).toBe('1\n');
    expect(rig.read('out/v')).toBe('1\n');
  });

  test('its rollback cannot be recorded: the apply fails saying nothing was undone, and the next apply undoes it', () => {
    sealed('run, then fail');
    const got = run();
    expect(got.stdout).toContain('\nexit 1\n');
    expect(got.stderr).toContain('error[atomic-apply-failed]: seal failed: the rollback to generation 1 did not complete; what is left:\n  - could not record the rollback (transaction.json: read-only file system (EROFS)): nothing was undone\n');
    expect(got.stderr).not.toMatch(/^\s+at /m);
    expect(got.stdout).toMatch(/\nagain 0\n$/);
    expect(rig.read('v.txt')).toBe('1\n');
    expect(rig.read('out/v')).toBe('1\n');
  });

  test('its commit cannot be recorded once healthy: the error says the next apply rolls it back, and it does', () => {
    sealed('check');
    const got = run();
    expect(got.stdout).toContain('\nexit 1\n');
    expect(got.stderr).toMatch(
      /^error\[generation-write-failed\]: could not write \S+\/\.nodegraph: healthy, but the commit is unfinished \(the next apply rolls it back\): could not record the commit \(transaction\.json: read-only file system \(EROFS\)\)\n/,
    );
    expect(got.stderr).not.toMatch(/^\s+at /m);
    expect(got.stdout).toContain('an interrupted atomic apply from generation 1 to 2: rolling it back first');
    expect(got.stdout).toMatch(/\nagain 0\n$/);
    expect(rig.read('out/v')).toBe('1\n');
  });
});
