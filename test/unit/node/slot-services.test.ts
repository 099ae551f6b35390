// containerd and kubelet in a slot, and the slot's verification (src/node/slot-services.ts), run
// against the fake runner: which systemctl verb each run uses, and what the checks say.

import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { helperAt } from '../../../src/node/helper.ts';
import type { SlotRun } from '../../../src/node/slot-run.ts';
import { serviceTask, verifiedTask } from '../../../src/node/slot-services.ts';
import { writeSwitch } from '../../../src/node/switch.ts';
import type { FakeRunner } from '../../support/fake-runner.ts';
import { afterIds, checkOf, contextFor, declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
let runcRoot: string;
let run: SlotRun;
beforeEach(() => {
  ({ dir, runner, runcRoot } = sandbox('slot-services'));
  const bundle = path.join(dir, 'layout/kube1');
  mkdirSync(path.join(bundle, 'rootfs'), { recursive: true });
  run = {
    slot: 'kube1',
    container: { id: 'kube1', runc: { binary: '/usr/sbin/runc', stateRoot: runcRoot }, bundle, consoleLog: path.join(bundle, 'console.log'), stopTimeoutSeconds: 5 },
    timeouts: { systemd: 5, service: 5, stop: 5, interval: 0.01, healthy: 3 },
  };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const boot = () => runner.run(['/usr/sbin/runc', '--root', runcRoot, 'run', '--bundle', run.container.bundle, 'kube1'], { cwd: dir });

function declareServices() {
  const d = declared();
  const base = { run, container: d.ng.ref('kube1/container'), helper: helperAt(path.join(dir, 'helper')) };
  const containerd = serviceTask(d.ng, { ...base, name: 'containerd', inputs: { config: d.ng.ref('kube1/containerd.config') }, after: [], reload: false });
  const kubelet = serviceTask(d.ng, { ...base, name: 'kubelet', inputs: { config: d.ng.ref('kube1/kubelet.config') }, after: [containerd], reload: true });
  return { d, containerd, kubelet };
}

describe('a service in the slot', () => {
  it('is enabled and started on a first run, restarted (after a reload) on a change, waited for when the container was just started', async () => {
    const { d } = declareServices();
    const kubelet = d.spec('kube1/kubelet');
    expect(afterIds(kubelet)).toEqual(['kube1/containerd']);
    expect(kubelet.verbs).toEqual({ create: 'start', update: 'restart', upstream: { 'kube1/container': 'start' } });
    await boot();
    expect(await checkOf('kube1/kubelet', kubelet, runner)).toBe('kubelet is inactive');

    runner.reset();
    const first = await runOf('kube1/kubelet', kubelet, runner);
    expect(first.logs).toEqual(['start kubelet']);
    expect(runner.events).toEqual([
      { kind: 'daemon-reload', id: 'kube1' },
      { kind: 'service-enable', id: 'kube1', unit: 'kubelet' },
      { kind: 'service-start', id: 'kube1', unit: 'kubelet', already: false },
    ]);
    expect(first.value).toEqual({ unit: 'kubelet', mainPid: runner.containers.get('kube1')!.services.get('kubelet')!.pid });
    expect(await checkOf('kube1/kubelet', kubelet, runner)).toBe(true);

    runner.reset();
    const changed = await runOf('kube1/kubelet', kubelet, runner, { firstRun: false });
    expect(changed.logs).toEqual(['restart kubelet']);
    expect(runner.events).toEqual([
      { kind: 'daemon-reload', id: 'kube1' },
      { kind: 'service-restart', id: 'kube1', unit: 'kubelet' },
    ]);

    // The container restarted in this apply: systemd started the enabled unit at boot.
    await runner.run(['/usr/sbin/runc', '--root', runcRoot, 'delete', '--force', 'kube1'], { cwd: dir });
    await boot();
    runner.reset();
    const rebooted = await runOf('kube1/kubelet', kubelet, runner, { firstRun: false, ran: ['kube1/container'] });
    expect(rebooted.logs).toEqual(['kubelet started with the container: waiting for it']);
    expect(runner.events).toEqual([]);
  });

  it('containerd is not reloaded before a restart; its stop is the helper’s', async () => {
    const { d } = declareServices();
    const containerd = d.spec('kube1/containerd');
    await boot();
    await runOf('kube1/containerd', containerd, runner);
    runner.reset();
    await runOf('kube1/containerd', containerd, runner, { firstRun: false });
    expect(runner.events).toEqual([{ kind: 'service-restart', id: 'kube1', unit: 'containerd' }]);
    expect(containerd.stop).toEqual([[path.join(dir, 'helper'), 'service', '/usr/sbin/runc', runcRoot, 'kube1', 'stop', 'containerd']]);
  });
});

describe('the slot verified', () => {
  it('waits for systemd, containerd answering and kubelet; clears a switch to this slot; its check is the health', async () => {
    const { d, containerd, kubelet } = declareServices();
    const marker = path.join(dir, 'layout/switch.json');
    verifiedTask(d.ng, { run, containerd, kubelet, after: [], marker });
    const verified = d.spec('kube1/verified');
    expect(verified.health?.within).toBe('5s');
    expect(verified.health?.stable).toBe('3s');
    await boot();
    expect(await checkOf('kube1/verified', verified, runner)).toBe('ctr version failed in kube1: ctr: failed to dial "/run/containerd/containerd.sock"');
    await runOf('kube1/containerd', d.spec('kube1/containerd'), runner);
    expect(await checkOf('kube1/verified', verified, runner)).toBe('kubelet in kube1 is inactive');
    await runOf('kube1/kubelet', d.spec('kube1/kubelet'), runner);

    writeSwitch(marker, { from: ['kube2'], to: 'kube1', reset: true });
    const done = await runOf('kube1/verified', verified, runner);
    expect(done).toEqual({ value: { verified: 'kube1' }, logs: ['the switch to kube1 is done'] });
    expect(existsSync(marker)).toBe(false);
    expect(await checkOf('kube1/verified', verified, runner)).toBe(true);
  });

  it('fails naming what did not answer in time, and keeps the logs; the health hook keeps them too', async () => {
    const { d, containerd, kubelet } = declareServices();
    verifiedTask(d.ng, { run: { ...run, timeouts: { ...run.timeouts, service: 0.05 } }, containerd, kubelet, after: [], marker: path.join(dir, 'switch.json') });
    const verified = d.spec('kube1/verified');
    await boot();
    const stateDir = path.join(dir, 'state');
    await expect(runOf('kube1/verified', verified, runner, { stateDir })).rejects.toThrow(/containerd answering in kube1/);
    expect(existsSync(path.join(stateDir, 'logs'))).toBe(true);
    const { ctx } = contextFor('kube1/verified', runner, { stateDir });
    expect(await verified.health!.onFailure!(ctx)).toMatch(new RegExp(`^kube1's logs are kept in ${stateDir}/logs/kube1-`));
  });
});
