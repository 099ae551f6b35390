// The container task and the systemd unit around it (src/node/slot-run.ts), run against the fake
// runner: what runc and systemctl are asked, and what the check then says.

import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { helperAt } from '../../../src/node/helper.ts';
import { containerTask, unitTask, type SlotRun } from '../../../src/node/slot-run.ts';
import type { FakeRunner } from '../../support/fake-runner.ts';
import { afterIds, checkOf, declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
let runcRoot: string;
beforeEach(() => ({ dir, runner, runcRoot } = sandbox('slot-run')));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const TIMEOUTS = { systemd: 5, service: 5, stop: 5, interval: 0.01, healthy: 0 };

function slotRun(): SlotRun {
  const bundle = path.join(dir, 'layout/kube1');
  mkdirSync(path.join(bundle, 'rootfs'), { recursive: true });
  writeFileSync(path.join(bundle, 'config.json'), '{}\n');
  return {
    slot: 'kube1',
    container: { id: 'kube1', runc: { binary: '/usr/sbin/runc', stateRoot: runcRoot }, bundle, consoleLog: path.join(bundle, 'console.log'), stopTimeoutSeconds: 5 },
    timeouts: TIMEOUTS,
  };
}

describe('the container task', () => {
  it('starts the container, waits for systemd, makes / rshared, removes a replaced rootfs; forced, restarts it', async () => {
    const d = declared();
    const run = slotRun();
    const rootfsDir = path.join(run.container.bundle, 'rootfs');
    mkdirSync(`${rootfsDir}.old`);
    const helper = helperAt(path.join(dir, 'helper'));
    containerTask(d.ng, {
      run,
      supervisor: 'runc',
      bundle: d.ng.ref('kube1/bundle'),
      rootfs: d.ng.ref('kube1/rootfs'),
      rootfsDir,
      bundleFiles: [path.join(run.container.bundle, 'config.json'), rootfsDir],
      sharedRoot: true,
      stop: helper.stopContainer(run.container.runc, 'kube1', 5),
      after: [d.ng.ref('kube1/takeover')],
    });
    const task = d.spec('kube1/container');
    expect(afterIds(task)).toEqual(['kube1/takeover']);
    expect(task.destroy).toBeUndefined();
    expect(await checkOf('kube1/container', task, runner)).toBe('container kube1 does not exist (container does not exist)');

    const first = await runOf('kube1/container', task, runner);
    expect(runner.events).toEqual([{ kind: 'container-start', id: 'kube1' }]);
    const created = runner.containers.get('kube1')!;
    expect(first.value).toEqual({ started: created.created, pid: created.pid });
    expect(runner.commands()).toContain(`/usr/sbin/runc --root ${runcRoot} exec kube1 mount --make-rshared /`);
    expect(runner.commands()).toContain(`/usr/sbin/runc --root ${runcRoot} exec kube1 systemctl is-system-running`);
    expect(existsSync(`${rootfsDir}.old`)).toBe(false);
    expect(JSON.parse(readFileSync(path.join(run.container.bundle, 'run.json'), 'utf8'))).toMatchObject({ supervisor: 'runc', id: 'kube1' });
    expect(await checkOf('kube1/container', task, runner)).toBe(true);

    runner.reset();
    const again = await runOf('kube1/container', task, runner, { forced: true, firstRun: false });
    expect(runner.events.map((e) => e.kind)).toEqual(['container-stop', 'container-delete', 'container-start']);
    expect(again.value).not.toEqual(first.value);
  });

  it("fails with systemd's state when it does not come up in time, and keeps the slot's logs", async () => {
    const d = declared();
    const run = { ...slotRun(), timeouts: { ...TIMEOUTS, systemd: 0.05 } };
    const rootfsDir = path.join(run.container.bundle, 'rootfs');
    containerTask(d.ng, {
      run,
      supervisor: 'runc',
      bundle: d.ng.ref('kube1/bundle'),
      rootfs: d.ng.ref('kube1/rootfs'),
      rootfsDir,
      bundleFiles: [rootfsDir],
      sharedRoot: false,
      stop: ['true'],
      after: [],
    });
    const stateDir = path.join(dir, 'state');
    const boot = runner.run.bind(runner);
    // systemd in this container never finishes booting.
    runner.run = async (command, options) => {
      const result = await boot(command, options);
      const c = runner.containers.get('kube1');
      if (c !== undefined) c.systemState = 'starting';
      return result;
    };
    await expect(runOf('kube1/container', d.spec('kube1/container'), runner, { stateDir })).rejects.toThrow(/systemd in kube1/);
    expect(existsSync(path.join(stateDir, 'logs'))).toBe(true);
  });
});

describe('the unit task', () => {
  it('writes the unit that runs the container and reloads systemd; the container is not touched', async () => {
    const d = declared();
    const run = slotRun();
    const file = path.join(dir, 'etc/systemd/system/nodegraph-kube1.service');
    unitTask(d.ng, { slot: 'kube1', container: run.container, file, remove: ['node-helper', 'unit-remove', file], after: [d.ng.ref('kube1/bundle')] });
    const task = d.spec('kube1/unit');
    expect(task.verbs).toEqual({ create: 'write', update: 'reload' });
    expect(await checkOf('kube1/unit', task, runner)).toBe(`${file} is missing`);
    await runOf('kube1/unit', task, runner);
    expect(readFileSync(file, 'utf8')).toContain(`--bundle ${run.container.bundle}`);
    expect(runner.events).toEqual([{ kind: 'host-unit', verb: 'daemon-reload', unit: '' }]);
    expect(await checkOf('kube1/unit', task, runner)).toBe(true);
  });
});
