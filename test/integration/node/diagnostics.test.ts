// What an operator reads when the node does not come up: runc's own reason
// for a container that did not start, and a failed service's status and
// journal.

import { readdirSync, readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runcArgv, runcReason, runDetachedArgv } from '../../../src/node/runc.ts';
import { makeRig, ok, type Rig } from '../../support/node/graph-rig.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

/** What runc 1.1.5 printed for a prestart hook that exits 1 (measured). */
const HOOK_FAILED =
  'time="2026-12-05T00:56:12Z" level=error msg="runc run failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: "\n';

function taskError(id: string): string {
  const done = rig.events.find((e) => e.type === 'task-done' && e.id === id && e.outcome === 'failed');
  return done !== undefined && 'error' in done ? String(done.error) : `(no failure recorded for ${id})`;
}

describe("runc's reason", () => {
  it('is the message of its error lines, unquoted', () => {
    expect(runcReason(HOOK_FAILED)).toBe(
      'runc run failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: ',
    );
    expect(runcReason('time="x" level=warning msg="a"\ntime="y" level=error msg="say \\"no\\""\n')).toBe('say "no"');
  });

  it('is the last lines printed when runc logged no error line', () => {
    expect(runcReason('1\n2\n3\n4\n5\n6\n\n')).toBe('2; 3; 4; 5; 6');
    expect(runcReason('')).toBe('');
  });
});

describe('a container that does not start', () => {
  it("fails its task with runc's words from the console log, from this attempt only", async () => {
    let attempts = 0;
    rig = makeRig({}, { answer: (argv) => (argv.includes('run') && argv.includes('--detach') ? { exitCode: 1, stderr: `${HOOK_FAILED.replace('#0', `#${attempts++}`)}`, failure: 'exited with code 1' } : undefined) });
    const consoleLog = path.join(rig.root, 'var/lib/nodegraph/containers/kube1/console.log');
    // Not atomic: the failure is reported as the task left it, nothing undone.
    expect(ok(await rig.apply({ atomic: false })).failed).toEqual(['kube1/container']);
    const logs = path.join(rig.dir, 'state/logs');
    const expected = (hook: number): string =>
      `runc could not start container kube1: runc run failed: unable to start container process: error during container init: error running hook #${hook}: error running hook: exit status 1, stdout: , stderr:  (console log ${consoleLog})\n` +
      `kube1's logs are kept in ${path.join(logs, readdirSync(logs).sort().at(-1)!)}`;
    expect(taskError('kube1/container')).toBe(expected(0));
    rig.events.length = 0;
    expect(ok(await rig.apply({ atomic: false })).failed).toEqual(['kube1/container']);
    expect(taskError('kube1/container')).toBe(expected(1));
    // Each failure kept its own copy of the console log.
    expect(readdirSync(logs).map((d) => readFileSync(path.join(logs, d, 'console.log'), 'utf8').match(/level=error/g)?.length)).toEqual([1, 2]);
    // The log keeps both attempts; the error named only the second.
    expect(readFileSync(consoleLog, 'utf8').match(/level=error/g)).toHaveLength(2);
  });
});

describe('a service that does not come up', () => {
  it("fails its task with the wait's words, then systemctl status and the unit's last journal lines", async () => {
    rig = makeRig({}, { failingUnits: { kubelet: '203/EXEC' } });
    expect(ok(await rig.apply({ atomic: false })).failed).toEqual(['kube1/kubelet']);
    const error = taskError('kube1/kubelet');
    const [first, ...rest] = error.split('\n');
    // Failed at the first probe: a unit that failed is not waited out.
    expect(first).toBe('gave up after 0.0s (1 probes) waiting for kubelet in kube1: kubelet is failed (failed); last result exit-code, 0 restarts by systemd');
    const kept = path.join(rig.dir, 'state/logs', readdirSync(path.join(rig.dir, 'state/logs'))[0]!);
    expect(rest).toEqual([
      'systemctl status kubelet:',
      '  × kubelet.service',
      '       Loaded: loaded (/etc/systemd/system/kubelet.service; enabled; preset: enabled)',
      '       Active: failed (Result: exit-code)',
      '     Main PID: 4242 (code=exited, status=203/EXEC)',
      'journalctl --unit kubelet (last 10 lines):',
      '  Dec 05 01:00:00 systemd[1]: Started kubelet.service.',
      '  Dec 05 01:00:00 systemd[1]: kubelet.service: Main process exited, code=exited, status=203/EXEC',
      "  Dec 05 01:00:00 systemd[1]: kubelet.service: Failed with result 'exit-code'.",
      `kube1's logs are kept in ${kept}`,
    ]);
    expect(readdirSync(kept).sort()).toEqual(['console.log', 'failed-units.txt', 'journal.txt', 'kubelet.service.txt']);
    expect(readFileSync(path.join(kept, 'failed-units.txt'), 'utf8')).toBe('kubelet.service loaded failed failed kubelet\n');
    expect(readFileSync(path.join(kept, 'kubelet.service.txt'), 'utf8')).toContain('status=203/EXEC');
    const statusCall = rig.runner.commands().find((c) => c.includes('systemctl status'));
    expect(statusCall).toMatch(/ exec kube1 systemctl status --no-pager --full --lines=0 kubelet$/);
  });
});

describe('a container an apply cut short started', () => {
  /** Container and service events, as words. */
  const lifecycle = (): string[] =>
    rig.runner.events.flatMap((e) =>
      e.kind === 'container-start' || e.kind === 'container-stop' ? [`${e.kind} ${e.id}`] : e.kind.startsWith('service-') && 'unit' in e ? [`${e.kind} ${e.unit}`] : [],
    );

  let cuts = 0;

  /** What an apply that changed the bundle did before a kill -9 right after `runc run`: config.json rendered, the old container gone, the new one run. */
  async function cutShortAfterRuncRun(): Promise<void> {
    rig.writeConfig((c) => ({ ...c, bundle: { annotations: { 'org.example.test': `cut short ${++cuts}` } } }));
    expect(ok(await rig.apply({ targets: ['kube1/bundle'] })).failed).toEqual([]);
    const slotDir = path.join(rig.root, 'var/lib/nodegraph/containers/kube1');
    const runc = { binary: '/usr/sbin/runc', stateRoot: path.join(rig.root, 'run/runc') };
    for (const argv of [runcArgv(runc, 'kill', 'kube1', '37'), runcArgv(runc, 'delete', 'kube1'), runDetachedArgv(runc, slotDir, 'kube1', path.join(slotDir, 'console.log'))]) {
      expect((await rig.runner.run(argv, { cwd: rig.dir })).exitCode).toBe(0);
    }
    rig.runner.reset();
  }

  it('is kept when it runs from the current bundle: the next apply starts nothing again', async () => {
    rig = makeRig();
    ok(await rig.apply());
    await cutShortAfterRuncRun();
    const pid = rig.runner.containers.get('kube1')!.pid;
    const summary = ok(await rig.apply());
    expect(summary.failed).toEqual([]);
    expect(summary.ran).toContain('kube1/container');
    expect(lifecycle()).toEqual([]);
    expect(rig.runner.containers.get('kube1')!.pid).toBe(pid);
    const logged = rig.events.filter((e) => e.type === 'task-log' && e.id === 'kube1/container').map((e) => ('message' in e ? e.message : ''));
    expect(logged).toEqual(['kube1 already runs from this bundle (an apply cut short started it): not restarted']);
    expect(ok(await rig.apply()).ran).toEqual([]);
  });

  it('is restarted when --replace asks for it, when its rootfs was swapped, or when it is run another way now', async () => {
    rig = makeRig();
    ok(await rig.apply());
    await cutShortAfterRuncRun();
    ok(await rig.apply({ replace: ['kube1/container'] }));
    expect(lifecycle()).toEqual(['container-stop kube1', 'container-start kube1', 'service-boot containerd', 'service-boot kubelet']);

    // A rootfs swapped in after the container was made (renamed into place: its ctime moves, its mtime does not).
    await cutShortAfterRuncRun();
    const rootfs = path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs');
    // The container started a second before the swap: ctime is read from the kernel's coarse clock, which may
    // lag the creation time's by 4-10 ms, so a swap right after the start could read as older than it.
    const container = rig.runner.containers.get('kube1')!;
    rig.runner.containers.set('kube1', { ...container, created: new Date(Date.parse(container.created) - 1000).toISOString() });
    renameSync(rootfs, `${rootfs}.new`);
    renameSync(`${rootfs}.new`, rootfs);
    ok(await rig.apply());
    expect(lifecycle()).toEqual(['container-stop kube1', 'container-start kube1', 'service-boot containerd', 'service-boot kubelet']);

    await cutShortAfterRuncRun();
    rig.writeConfig((c) => ({ ...c, bundle: {}, runtime: { runc: '/usr/bin/runc' } }));
    expect(ok(await rig.apply({ targets: ['kube1/bundle'] })).failed).toEqual([]);
    rig.runner.reset();
    ok(await rig.apply());
    expect(lifecycle()).toEqual(['container-stop kube1', 'container-start kube1', 'service-boot containerd', 'service-boot kubelet']);
  });
});
