// A slot's bundle task (src/node/slot-bundle.ts): config.json from the node's parameters, the GPU
// grants read as it runs and a base config; run against the fake runner (it runs no command).

import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NO_GRANTS, type GpuGrants } from '../../../src/node/gpu.ts';
import { bundleTask } from '../../../src/node/slot-bundle.ts';
import type { FakeRunner } from '../../support/fake-runner.ts';
import { declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
beforeEach(() => ({ dir, runner } = sandbox('slot-bundle')));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const params = () => ({
  hostname: 'node-a',
  rootfs: 'rootfs',
  shared: [{ destination: '/var/lib/kubelet', source: path.join(dir, 'var/lib/kubelet') }],
  hostNetwork: false,
  extraMounts: [{ destination: '/images', type: 'bind', source: path.join(dir, 'images'), options: ['rbind', 'ro'] }],
  annotations: { 'org.nodegraph.slot': 'kube1' },
});

describe('the bundle task', () => {
  it("renders config.json with the node's parameters and the grants as they are when it runs", async () => {
    const d = declared();
    const configJson = path.join(dir, 'layout/kube1/config.json');
    let grants: GpuGrants = NO_GRANTS;
    bundleTask(d.ng, { slot: 'kube1', configJson, params: params(), baseFile: undefined, grants: () => grants, after: [] });
    const task = d.spec('kube1/bundle');
    expect(task.outputs).toEqual([configJson]);
    await runOf('kube1/bundle', task, runner);
    const first = JSON.parse(readFileSync(configJson, 'utf8'));
    expect(first.hostname).toBe('node-a');
    expect(first.annotations['org.nodegraph.slot']).toBe('kube1');
    expect(first.mounts.map((m: { destination: string }) => m.destination)).toEqual(expect.arrayContaining(['/var/lib/kubelet', '/images']));
    expect(first.linux.devices ?? []).toEqual([]);

    const device = { path: '/dev/nvidia0', type: 'c' as const, major: 195, minor: 0, fileMode: 0o666, uid: 0, gid: 0 };
    grants = { granted: true, devices: [device], mounts: [{ destination: '/usr/lib/libcuda.so.1', type: 'bind', source: '/usr/lib/libcuda.so.1', options: ['ro', 'bind'] }] };
    await runOf('kube1/bundle', task, runner);
    const granted = JSON.parse(readFileSync(configJson, 'utf8'));
    expect(granted.linux.devices).toEqual([device]);
    expect(granted.mounts.map((m: { destination: string }) => m.destination)).toContain('/usr/lib/libcuda.so.1');
    expect(runner.calls).toEqual([]);
  });

  it('starts from a base config, keeping what the node does not set; a base that is not an OCI config fails naming it', async () => {
    const d = declared();
    const configJson = path.join(dir, 'config.json');
    const baseFile = path.join(dir, 'base.json');
    writeFileSync(baseFile, JSON.stringify({ ociVersion: '1.0.2', process: { args: ['/sbin/init'], cwd: '/', user: { uid: 0, gid: 0 } }, root: { path: 'rootfs' }, 'org.example.kept': true }));
    bundleTask(d.ng, { slot: 'kube1', configJson, params: params(), baseFile, grants: () => NO_GRANTS, after: [] });
    const task = d.spec('kube1/bundle');
    expect(task.inputs?.base).toEqual({ kind: 'file', path: baseFile });
    await runOf('kube1/bundle', task, runner);
    expect(JSON.parse(readFileSync(configJson, 'utf8'))['org.example.kept']).toBe(true);
    writeFileSync(baseFile, JSON.stringify({ process: 'no' }));
    await expect(runOf('kube1/bundle', task, runner)).rejects.toThrow(`bundle.base ${baseFile} is not an OCI runtime config: `);
    writeFileSync(baseFile, '{ "ociVersion": ');
    await expect(runOf('kube1/bundle', task, runner)).rejects.toThrow(`bundle.base ${baseFile} is not JSON: `);
  });
});
