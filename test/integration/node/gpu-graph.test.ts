// GPU hosts through the whole graph with the fake runner, on a fake device
// tree below the root prefix: character devices made with mknod (root only).

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { OciSpec } from '../../../src/node/bundle.ts';
import { makeRig, ok, type Rig } from '../../support/node/graph-rig.ts';

let rig: Rig | undefined;
afterEach(() => rig?.cleanup());

/** Device nodes inside the fake container, as `stat -c '%n %F %t %T %a'` prints them, by path. */
const inside = new Map<string, string>();

/** Answers the NVIDIA task's mknod script and the check's stat inside the container. */
function answer(argv: readonly string[]) {
  const at = argv.indexOf('exec');
  if (at < 0) return undefined;
  const [program, ...args] = argv.slice(at + 2);
  if (program === 'sh' && args[1]?.includes('mknod')) {
    const nodes = args.slice(3);
    for (let i = 0; i < nodes.length; i += 5) {
      const [p, , major, minor, mode] = nodes.slice(i, i + 5);
      inside.set(p!, `${p} character special file ${Number(major).toString(16)} ${Number(minor).toString(16)} ${mode}`);
    }
    return { exitCode: 0, stdout: '' };
  }
  if (program === 'stat') {
    const paths = args.slice(2);
    const missing = paths.find((p) => !inside.has(p));
    if (missing !== undefined) return { exitCode: 1, stdout: '', stderr: `stat: cannot statx '${missing}': No such file or directory\n` };
    return { exitCode: 0, stdout: `${paths.map((p) => inside.get(p)).join('\n')}\n` };
  }
  return undefined;
}

function mknod(r: Rig, name: string, major: number, minor: number): void {
  mkdirSync(path.join(r.root, 'dev'), { recursive: true });
  rmSync(path.join(r.root, 'dev', name), { force: true });
  execFileSync('mknod', [path.join(r.root, 'dev', name), 'c', String(major), String(minor)]);
}

function fakeGpu(r: Rig): void {
  mknod(r, 'nvidia0', 195, 0);
  mknod(r, 'nvidiactl', 195, 255);
  mknod(r, 'nvidia-uvm', 235, 0);
  const lib = path.join(r.root, 'usr/lib/x86_64-linux-gnu');
  mkdirSync(lib, { recursive: true });
  writeFileSync(path.join(lib, 'libcuda.so.1'), 'fake libcuda\n');
}

const slotDir = (r: Rig): string => path.join(r.root, 'var/lib/nodegraph/containers/kube1');
const bundle = (r: Rig): OciSpec => JSON.parse(readFileSync(path.join(slotDir(r), 'config.json'), 'utf8')) as OciSpec;
const devices = (r: Rig): string[] => (bundle(r).linux?.devices ?? []).map((d) => `${d.path} ${d.major}:${d.minor} ${d.fileMode?.toString(8)}`);
const containerdToml = (r: Rig): string => readFileSync(path.join(slotDir(r), 'rootfs/etc/containerd/config.toml'), 'utf8');
const changes = async (r: Rig) =>
  ok(await r.plan())
    .plan.entries()
    .filter((e) => e.action !== 'unchanged')
    .map((e) => ({ id: String(e.id), action: e.action, reasons: e.reasons }));

describe.runIf(process.getuid?.() === 0)('GPU hosts (a fake device tree made with mknod below the root prefix)', () => {
  it('grants the devices and driver libraries found when the slot is built, and rebuilds the NVIDIA state after the container starts', async () => {
    inside.clear();
    rig = makeRig({ gpu: 'auto' }, { answer });
    fakeGpu(rig);
    const applied = ok(await rig.apply());
    expect(applied.failed).toEqual([]);
    expect(devices(rig)).toEqual(['/dev/nvidia-uvm 235:0 666', '/dev/nvidia0 195:0 666', '/dev/nvidiactl 195:255 666']);
    expect(bundle(rig).mounts?.find((m) => m.destination === '/usr/lib/x86_64-linux-gnu/libcuda.so.1')).toEqual({
      destination: '/usr/lib/x86_64-linux-gnu/libcuda.so.1',
      type: 'bind',
      source: path.join(rig.root, 'usr/lib/x86_64-linux-gnu/libcuda.so.1'),
      options: ['bind', 'ro', 'nosuid', 'nodev'],
    });
    expect(containerdToml(rig)).toContain('BinaryName = "/usr/bin/nvidia-container-runtime"');
    expect([...inside.values()]).toEqual([
      '/dev/nvidia-uvm character special file eb 0 666',
      '/dev/nvidia0 character special file c3 0 666',
      '/dev/nvidiactl character special file c3 ff 666',
    ]);
    // A first start: nothing was enabled, so nothing to stop; the services are enabled after the NVIDIA state.
    expect(applied.ran.map(String).indexOf('kube1/nvidia')).toBeLessThan(applied.ran.map(String).indexOf('kube1/containerd'));
    expect(await changes(rig)).toEqual([]);

    // A soft reboot: systemd starts the enabled services; they are stopped, the NVIDIA state rebuilt, both started.
    rig.runner.events.length = 0;
    inside.clear();
    ok(await rig.apply({ replace: ['kube1/container'] }));
    expect(rig.runner.events.filter((e) => e.kind !== 'remove').map((e) => `${e.kind}${'unit' in e ? ` ${e.unit}` : ''}`)).toEqual([
      'container-stop',
      'container-delete',
      'container-start',
      'service-boot containerd',
      'service-boot kubelet',
      'service-stop kubelet',
      'service-stop containerd',
      'service-start containerd',
      'service-start kubelet',
    ]);
    expect(inside.size).toBe(3);

    // A reboot gave nvidia-uvm another major: the check sees it, the bundle follows, the container restarts.
    mknod(rig, 'nvidia-uvm', 236, 0);
    expect(await changes(rig)).toContainEqual({
      id: 'kube1/gpu',
      action: 'drift',
      reasons: ['check failed: NVIDIA devices or driver libraries changed on the host: + /dev/nvidia-uvm 236:0, - /dev/nvidia-uvm 235:0'],
    });
    rig.runner.events.length = 0;
    ok(await rig.apply());
    expect(devices(rig)).toContain('/dev/nvidia-uvm 236:0 666');
    expect(rig.runner.events.filter((e) => e.kind === 'container-start')).toHaveLength(1);
    expect(inside.get('/dev/nvidia-uvm')).toBe('/dev/nvidia-uvm character special file ec 0 666');
    // A device node gone inside is drift of the NVIDIA state.
    inside.delete('/dev/nvidia0');
    expect((await changes(rig)).map((c) => `${c.id}: ${c.action}`)).toEqual(['kube1/nvidia: drift']);
  });

  it('leaves a slot made without GPU grants alone when a GPU appears, and says adding one needs a new rootfs', async () => {
    inside.clear();
    rig = makeRig({ gpu: 'auto' }, { answer });
    ok(await rig.apply());
    expect(devices(rig)).toEqual([]);
    fakeGpu(rig);
    // What follows the check is only known after it: the apply shows nothing downstream moves.
    const plan = (await changes(rig)).filter((c) => c.action !== 'maybe');
    expect(plan).toEqual([
      {
        id: 'kube1/gpu',
        action: 'drift',
        reasons: [
          "check failed: an NVIDIA GPU is on the host (/dev/nvidia-uvm 235:0, /dev/nvidia0 195:0, /dev/nvidiactl 195:255), but kube1's rootfs was made without GPU grants: kube1 is left alone; adding a GPU needs a new rootfs (a new image, or a switch to a slot built afresh)",
        ],
      },
    ]);
    rig.runner.events.length = 0;
    const applied = ok(await rig.apply());
    expect(applied.ran.map(String)).toEqual(['kube1/gpu']);
    expect(rig.runner.events).toEqual([]);
    expect(devices(rig)).toEqual([]);
    expect(containerdToml(rig)).not.toContain('nvidia');
    expect(await changes(rig)).toEqual([]);
  });

  it('a host without NVIDIA devices gets nothing, and a damaged grants file is one clear error', async () => {
    rig = makeRig({ gpu: 'auto' }, { answer });
    const applied = ok(await rig.apply());
    expect(applied.failed).toEqual([]);
    expect(devices(rig)).toEqual([]);
    expect(rig.runner.calls.filter((c) => c.argv.includes('stat') || c.argv.some((a) => a.includes('mknod')))).toEqual([]);
    writeFileSync(path.join(slotDir(rig), 'gpu.json'), '{"granted": "yes"}\n');
    const again = ok(await rig.apply({ atomic: false }));
    expect(again.failed.map(String)).toEqual(['kube1/gpu']);
    const done = rig.events.find((e) => e.type === 'task-done' && e.id === 'kube1/gpu' && e.outcome === 'failed');
    expect(done !== undefined && 'error' in done ? String(done.error) : '').toContain(
      `the GPU grants file ${path.join(slotDir(rig), 'gpu.json')} is damaged: granted: Invalid input: expected boolean, received string`,
    );
  });
});
