// The node's host tasks (src/node/host-tasks.ts) and the provision task (src/node/provision.ts), run
// against the fake runner: runc asked for its version, the helper written, folders in the ledger,
// a binary installed once.

import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { foldersAt } from '../../../src/node/folders.ts';
import { HELPER_SCRIPT, helperAt } from '../../../src/node/helper.ts';
import { hostDirTask, runtimeTask } from '../../../src/node/host-tasks.ts';
import { provisionTask } from '../../../src/node/provision.ts';
import { FakeRunner } from '../../support/fake-runner.ts';
import { afterIds, checkOf, declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
beforeEach(() => ({ dir, runner } = sandbox('host-tasks')));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('host/runtime', () => {
  const spec = (runc = '/usr/sbin/runc') => ({
    runc: { binary: runc },
    install: undefined,
    stamp: path.join(dir, 'var/lib/nodegraph/runc.version.json'),
    scratch: path.join(dir, 'var/lib/nodegraph/downloads'),
    helper: helperAt(path.join(dir, 'usr/local/libexec/nodegraph/node-helper')),
    after: [],
  });

  it("writes the lifecycle helper once runc answers; its check needs both", async () => {
    const d = declared();
    const s = spec();
    runtimeTask(d.ng, s);
    const task = d.spec('host/runtime');
    expect(task.outputs).toEqual([s.helper.path]);
    expect(await checkOf('host/runtime', task, runner)).toBe(`the lifecycle helper ${s.helper.path} is missing`);
    const { value } = await runOf('host/runtime', task, runner);
    expect(value).toEqual({ runc: 'runc version 1.1.5 (fake)' });
    expect(readFileSync(s.helper.path, 'utf8')).toBe(HELPER_SCRIPT);
    expect(statSync(s.helper.path).mode & 0o777).toBe(0o755);
    expect(runner.commands()).toEqual(['/usr/sbin/runc --version']);
    expect(await checkOf('host/runtime', task, runner)).toBe(true);
  });

  it('fails naming where runc does not run, and writes no helper', async () => {
    const d = declared();
    const s = spec('/opt/missing/runc');
    runtimeTask(d.ng, s);
    const failing = new FakeRunner({ sandbox: dir, answer: (argv) => (argv[0] === '/opt/missing/runc' ? { ok: false, exitCode: 127, stderr: 'sh: /opt/missing/runc: not found\n', output: 'sh: /opt/missing/runc: not found\n', failure: 'exited with code 127' } : undefined) });
    await expect(runOf('host/runtime', d.spec('host/runtime'), failing)).rejects.toThrow(
      'runc does not run at /opt/missing/runc (sh: /opt/missing/runc: not found): install it (apt-get install runc) or set runtime.install',
    );
    expect(existsSync(s.helper.path)).toBe(false);
  });
});

describe('a host folder', () => {
  it('is made and listed in the ledger; one the ledger does not name is none of the node’s', async () => {
    const d = declared();
    const folders = foldersAt(path.join(dir, 'var/lib/nodegraph/host-folders'));
    const kubelet = path.join(dir, 'var/lib/kubelet');
    hostDirTask(d.ng, { id: 'host/kubelet-dir', dir: kubelet, description: 'kubelet state', folders, destroy: [['node-helper', 'remove', kubelet]], after: [d.ng.ref('host/runtime')] });
    const task = d.spec('host/kubelet-dir');
    expect(afterIds(task)).toEqual(['host/runtime']);
    expect(task.destroy).toEqual([['node-helper', 'remove', kubelet]]);
    expect(await checkOf('host/kubelet-dir', task, runner)).toBe(`${kubelet} is missing`);
    mkdirSync(kubelet, { recursive: true });
    expect(await checkOf('host/kubelet-dir', task, runner)).toBe(`${kubelet} is not in nodegraph's folder ledger ${folders.ledger}`);
    rmSync(path.join(dir, 'var/lib/kubelet'), { recursive: true });
    expect((await runOf('host/kubelet-dir', task, runner)).value).toEqual({ dir: kubelet });
    expect(folders.origin(kubelet)).toBe('made');
    expect(await checkOf('host/kubelet-dir', task, runner)).toBe(true);
    expect(runner.calls).toEqual([]);
  });

  it('declares no destroy when it has none', () => {
    const d = declared();
    hostDirTask(d.ng, { id: 'host/x', dir: path.join(dir, 'x'), description: 'x', folders: foldersAt(path.join(dir, 'ledger')), destroy: [], after: [] });
    expect(d.spec('host/x').destroy).toBeUndefined();
  });
});

describe('a provisioned binary', () => {
  it('is installed from a local file with its stamp, then found present; its check says what is missing', async () => {
    const d = declared();
    const source = path.join(dir, 'kubelet-1.30.0');
    writeFileSync(source, '#!/bin/sh\necho kubelet\n');
    const dest = path.join(dir, 'rootfs/usr/local/bin/kubelet');
    const spec = { name: 'kubelet', source: { version: '1.30.0', source }, dest, stamp: path.join(dir, 'rootfs/stamp.json'), expect: [dest], scratch: path.join(dir, 'downloads') };
    provisionTask(d.ng, 'kube1/provision.kubelet', spec, [], d.ng.ref('kube1/rootfs'));
    const task = d.spec('kube1/provision.kubelet');
    expect(task.inputs?.rootfs).toMatchObject({ kind: 'task', id: 'kube1/rootfs' });
    expect(await checkOf('kube1/provision.kubelet', task, runner)).toBe(`kubelet 1.30.0 is not installed at ${dest}`);
    const first = await runOf('kube1/provision.kubelet', task, runner);
    expect(first).toEqual({ value: { name: 'kubelet', version: '1.30.0' }, logs: ['kubelet 1.30.0: installed'] });
    expect(readFileSync(dest, 'utf8')).toBe('#!/bin/sh\necho kubelet\n');
    expect(await checkOf('kube1/provision.kubelet', task, runner)).toBe(true);
    expect((await runOf('kube1/provision.kubelet', task, runner)).logs).toEqual(['kubelet 1.30.0: present']);
    expect(runner.calls).toEqual([]);
  });
});
