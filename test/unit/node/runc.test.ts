import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { containerState, isRunning, parseState, runDetachedArgv, stopContainer } from '../../../src/node/runc.ts';
import { parseUnitState, serviceAction, services, settling, systemctlArgv, systemReady, unitActive } from '../../../src/node/services.ts';
import { scriptedExec } from '../../support/exec.ts';
import type { Clock } from '../../../src/node/wait.ts';

/** runc's state folder: there (a node was made here), so a probe asks runc. */
const runc = { binary: '/usr/sbin/runc', stateRoot: mkdtempSync(path.join(tmpdir(), 'nodegraph-runc-root-')) };
const state = (status: string) => ({ stdout: JSON.stringify({ id: 'kube1', status, pid: 42, created: '2025-01-01T00:00:00Z', bundle: '/b' }) });
const instant: Clock = { now: (() => { let t = 0; return () => (t += 10); })(), sleep: async () => {} };

describe('runc', () => {
  it('reads state, and a missing container as absent', async () => {
    const { exec, calls } = scriptedExec((argv) => (argv.at(-1) === 'kube1' ? state('running') : { exitCode: 1, stderr: 'container does not exist\n' }));
    expect(await containerState(exec, runc, 'kube1')).toEqual({ status: 'running', pid: 42, created: '2025-01-01T00:00:00Z', bundle: '/b' });
    expect(await containerState(exec, runc, 'kube2')).toEqual({ status: 'absent', detail: 'container does not exist' });
    expect(calls[0]).toEqual(['/usr/sbin/runc', '--root', runc.stateRoot, 'state', 'kube1']);
    expect(await isRunning(exec, runc, 'kube1')).toBe(true);
    expect(await isRunning(exec, runc, 'kube2')).toBe('container kube2 does not exist (container does not exist)');
  });

  it('reads no state where runc has no state folder, without running runc (which would make the folder)', async () => {
    const { exec, calls } = scriptedExec(() => state('running'));
    const missing = path.join(runc.stateRoot, 'no/such/root');
    expect(await containerState(exec, { ...runc, stateRoot: missing }, 'kube1')).toEqual({ status: 'absent', detail: `no runc state folder ${missing}` });
    expect(calls).toEqual([]);
  });

  it('ignores state it cannot read', () => {
    expect(parseState('not json')).toBeUndefined();
    expect(parseState('{"status":"exploded"}')).toBeUndefined();
  });

  it('stops with the signal systemd halts on, waits, and deletes', async () => {
    let status = 'running';
    const { exec, calls } = scriptedExec((argv) => {
      if (argv.includes('kill')) status = 'stopped';
      if (argv.includes('delete')) status = 'gone';
      return argv.includes('state') ? (status === 'gone' ? { exitCode: 1 } : state(status)) : {};
    });
    expect(await stopContainer(exec, runc, 'kube1', { timeoutMs: 1000, clock: instant })).toBe('running');
    expect(calls.map((c) => c.slice(3).join(' '))).toEqual(['state kube1', 'kill kube1 37', 'state kube1', 'delete --force kube1']);
  });

  it('succeeds on a container that is gone', async () => {
    const { exec, calls } = scriptedExec(() => ({ exitCode: 1, stderr: 'container does not exist' }));
    expect(await stopContainer(exec, runc, 'kube1', { timeoutMs: 1000, clock: instant })).toBe('absent');
    expect(calls).toHaveLength(1);
  });

  it('kills a container that will not stop', async () => {
    const { exec, calls } = scriptedExec((argv) => (argv.includes('state') ? state('running') : {}));
    await stopContainer(exec, runc, 'kube1', { timeoutMs: 50, intervalMs: 10, clock: instant });
    expect(calls.map((c) => c.slice(3).join(' '))).toContain('kill --all kube1 KILL');
  });

  it('detaches with the console in a log file, not a pipe', () => {
    expect(runDetachedArgv({ binary: '/usr/sbin/runc' }, '/b', 'kube1', '/b/console.log')).toEqual([
      'sh', '-c', 'log=$1; shift; exec "$@" </dev/null >>"$log" 2>&1', 'sh', '/b/console.log',
      '/usr/sbin/runc', 'run', '--detach', '--bundle', '/b', 'kube1',
    ]);
  });
});

describe('services', () => {
  it('runs systemctl in the container through runc exec, or on the host', () => {
    expect(systemctlArgv({ kind: 'container', runc, id: 'kube1' }, 'restart', 'containerd')).toEqual([
      '/usr/sbin/runc', '--root', runc.stateRoot, 'exec', 'kube1', 'systemctl', 'restart', 'containerd',
    ]);
    expect(systemctlArgv({ kind: 'host' }, 'daemon-reload')).toEqual(['systemctl', 'daemon-reload']);
  });

  it('reads is-active and MainPID', async () => {
    const { exec } = scriptedExec((argv) =>
      argv.includes('is-active') ? { exitCode: 3, stdout: 'inactive\n' } : argv.includes('show') ? { stdout: '4242\n' } : {},
    );
    const s = services(exec, { kind: 'host' });
    expect(await s.activeState('kubelet')).toBe('inactive');
    expect(await s.mainPid('kubelet')).toBe(4242);
  });

  it('waits for systemd to come up, taking degraded as up', async () => {
    const answers = ['starting', 'starting', 'degraded'];
    const { exec } = scriptedExec(() => ({ exitCode: 1, stdout: `${answers.shift() ?? 'running'}\n` }));
    const r = await systemReady(services(exec, { kind: 'host' }), 'systemd', { timeoutMs: 1000, intervalMs: 10, clock: instant });
    expect(r.ok).toBe(true);
  });

  it('says what the unit was when it did not become active', async () => {
    const { exec } = scriptedExec(() => ({ stdout: 'ActiveState=activating\nSubState=start\nNRestarts=0\nMainPID=7\nResult=success\n' }));
    const r = await unitActive(services(exec, { kind: 'host' }), 'kubelet', 'kubelet in kube1', { timeoutMs: 30, intervalMs: 10, clock: instant });
    expect(!r.ok && r.error).toMatchObject({ reason: 'wait-timeout', lastDetail: 'kubelet is activating (start); last result success, 0 restarts by systemd' });
  });

  it('gives up on a unit at once when it is seen failing or restarted by systemd, not at the timeout', async () => {
    const show = (active: string, sub: string, restarts: number, pid: number): string =>
      `ActiveState=${active}\nSubState=${sub}\nNRestarts=${restarts}\nMainPID=${pid}\nResult=${restarts > 0 ? 'exit-code' : 'success'}\n`;
    // Restart=always with a binary that cannot run: a moment "active" between fork and exec, then waiting to restart.
    for (const [what, answers] of [
      ['active for a moment, then restarted', [show('active', 'running', 0, 10), show('active', 'running', 1, 11)]],
      ['waiting to be restarted after a failure', [show('activating', 'start', 0, 10), show('activating', 'auto-restart', 0, 0)]],
      ['failed', [show('failed', 'failed', 0, 0)]],
    ] as const) {
      const left = [...answers];
      const { exec } = scriptedExec(() => ({ stdout: left.length > 1 ? left.shift()! : left[0]! }));
      const r = await unitActive(services(exec, { kind: 'host' }), 'kubelet', 'kubelet in kube1', { timeoutMs: 60_000, intervalMs: 10, clock: instant });
      expect(!r.ok && r.error.reason, what).toBe('wait-hopeless');
      expect(!r.ok && r.error.attempts, what).toBe(answers.length);
    }
  });

  it('takes a unit as up once it is active and running with the same process at two probes in a row', () => {
    const state = (active: string, sub: string, restarts: number, mainPid: number) => ({ active, sub, restarts, mainPid, result: 'success' });
    const first = state('activating', 'start', 2, 0);
    expect(settling(first, undefined, state('active', 'running', 2, 10))).toBe('waiting');
    expect(settling(first, state('active', 'running', 2, 9), state('active', 'running', 2, 10))).toBe('waiting');
    expect(settling(first, state('active', 'running', 2, 10), state('active', 'running', 2, 10))).toBe('up');
    expect(settling(first, state('active', 'running', 2, 10), state('active', 'running', 3, 10))).toBe('failing');
    expect(parseUnitState('ActiveState=failed\nSubState=failed\nNRestarts=4\nMainPID=0\nResult=exit-code\n')).toEqual({ ...state('failed', 'failed', 4, 0), result: 'exit-code' });
  });

  it('waits for an enabled service the (re)started container brought up, enables and starts one it did not, restarts otherwise', () => {
    expect(serviceAction({ containerStarted: true, firstRun: false, enabled: true })).toBe('wait');
    expect(serviceAction({ containerStarted: true, firstRun: true, enabled: true })).toBe('wait');
    expect(serviceAction({ containerStarted: true, firstRun: false, enabled: false })).toBe('start');
    expect(serviceAction({ containerStarted: false, firstRun: true, enabled: false })).toBe('start');
    expect(serviceAction({ containerStarted: true, firstRun: true, enabled: false })).toBe('start');
    expect(serviceAction({ containerStarted: false, firstRun: false, enabled: false })).toBe('restart');
  });
});
