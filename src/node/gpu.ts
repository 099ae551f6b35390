// NVIDIA GPUs: find the device nodes and driver libraries on the host, decide
// which a slot is granted, and rebuild the NVIDIA state inside the running
// node. Discovery is a task's work, not the graph's load: `<slot>/gpu` writes
// the slot's grants, which the bundle and containerd's configuration read, and
// its check discovers again on every plan and apply, so a reboot (new device
// numbers) or a driver change is followed. Whether a slot has GPUs at all is
// decided once per rootfs: a slot whose rootfs was made without grants is left
// alone when a GPU appears (adding one needs a new rootfs: a new image, or a
// slot built afresh), and a host without NVIDIA devices gets nothing at all.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { deviceSchema, mountSchema, type Device, type Mount } from './bundle.ts';
import { execOf, lastLine, tryExec, type Exec } from './exec.ts';
import type { Host } from './host.ts';
import { renderFile } from './render.ts';
import { execInArgv, type RuncOptions } from './runc.ts';
import { services } from './services.ts';

export interface GpuDiscovery {
  readonly devices: Device[];
  /** Driver libraries and tools, bind-mounted read-only at the same path. */
  readonly mounts: Mount[];
}

const DEVICE_NAME = /^nvidia([0-9]+|ctl|-uvm|-uvm-tools|-modeset)$/;
const LIBRARY_NAME = /^lib(nvidia-[A-Za-z0-9_-]+|cuda|nvcuvid|nvoptix)\.so(\.[0-9]+)*$/;
const LIBRARY_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];
const TOOLS = ['/usr/bin/nvidia-smi', '/usr/bin/nvidia-debugdump', '/usr/bin/nvidia-persistenced'];

/** Linux dev_t → major, minor (the glibc encoding). */
export function splitDevice(rdev: bigint): { major: number; minor: number } {
  const major = ((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn);
  const minor = (rdev & 0xffn) | ((rdev >> 12n) & ~0xffn);
  return { major: Number(major), minor: Number(minor) };
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

function charDevice(hostPath: string, nodePath: string): Device | undefined {
  try {
    const stat = statSync(hostPath, { bigint: true });
    if (!stat.isCharacterDevice()) return undefined;
    return { path: nodePath, type: 'c', ...splitDevice(stat.rdev), fileMode: 0o666, uid: 0, gid: 0 };
  } catch {
    return undefined;
  }
}

export function discoverNvidia(host: Host): GpuDiscovery {
  const devices: Device[] = [];
  for (const name of listDir(host.path('/dev'))) {
    if (!DEVICE_NAME.test(name)) continue;
    const device = charDevice(host.path(`/dev/${name}`), `/dev/${name}`);
    if (device !== undefined) devices.push(device);
  }
  for (const name of listDir(host.path('/dev/nvidia-caps'))) {
    const device = charDevice(host.path(`/dev/nvidia-caps/${name}`), `/dev/nvidia-caps/${name}`);
    if (device !== undefined) devices.push(device);
  }
  if (devices.length === 0) return { devices: [], mounts: [] };

  const files: string[] = [];
  for (const dir of LIBRARY_DIRS) {
    for (const name of listDir(host.path(dir))) if (LIBRARY_NAME.test(name)) files.push(`${dir}/${name}`);
  }
  for (const tool of TOOLS) if (host.exists(tool)) files.push(tool);
  const mounts = files.map((file) => ({
    destination: file,
    type: 'bind',
    source: host.path(file),
    options: ['bind', 'ro', 'nosuid', 'nodev'],
  }));
  return { devices, mounts };
}

// ---- the slot's grants -------------------------------------------------------

/** What a slot grants its container: `granted` is decided once per rootfs; the devices and mounts follow the host. */
export interface GpuGrants extends GpuDiscovery {
  readonly granted: boolean;
}

export const NO_GRANTS: GpuGrants = { granted: false, devices: [], mounts: [] };

const grantsSchema = z.strictObject({ granted: z.boolean(), devices: z.array(deviceSchema), mounts: z.array(mountSchema) });
const discoverySchema = z.strictObject({ devices: z.array(deviceSchema), mounts: z.array(mountSchema) });

function readJson<T>(file: string, schema: z.ZodType<T>, what: string): T | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} ${file} is not JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new Error(`${what} ${file} is damaged: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/** The grants `<slot>/gpu` wrote; none when it has not run (or `gpu` is `off`). */
export const readGrants = (file: string): GpuGrants => readJson(file, grantsSchema, 'the GPU grants file') ?? NO_GRANTS;

/** Does an existing config.json grant NVIDIA devices? How a slot built before its grants were recorded is read. */
function bundleGrantsNvidia(configJson: string): boolean | undefined {
  let spec: { linux?: { devices?: { path?: unknown }[] } };
  try {
    spec = JSON.parse(readFileSync(configJson, 'utf8')) as typeof spec;
  } catch {
    return undefined;
  }
  return (spec.linux?.devices ?? []).some((d) => typeof d.path === 'string' && d.path.startsWith('/dev/nvidia'));
}

/**
 * Whether the slot has GPUs: kept from its last grants while the rootfs is the same; decided from what
 * the host has for a new rootfs, or from the bundle of a slot built before its grants were recorded.
 */
export function decideGranted(o: {
  readonly before: GpuGrants | undefined;
  readonly newRootfs: boolean;
  readonly bundleGrants: boolean | undefined;
  readonly found: GpuDiscovery;
}): boolean {
  if (o.before !== undefined && !o.newRootfs) return o.before.granted;
  if (o.before === undefined && !o.newRootfs && o.bundleGrants !== undefined) return o.bundleGrants;
  return o.found.devices.length > 0;
}

const describeDevice = (d: Device): string => `${d.path} ${d.major}:${d.minor}`;

/** What changed between two discoveries, in words: `+ /dev/nvidia-uvm 236:0, - /dev/nvidia-uvm 235:0`. */
export function describeChange(before: GpuDiscovery, now: GpuDiscovery): string {
  const words = (list: readonly string[]): Set<string> => new Set(list);
  const was = words([...before.devices.map(describeDevice), ...before.mounts.map((m) => m.destination)]);
  const is = words([...now.devices.map(describeDevice), ...now.mounts.map((m) => m.destination)]);
  const added = [...is].filter((w) => !was.has(w)).map((w) => `+ ${w}`);
  const removed = [...was].filter((w) => !is.has(w)).map((w) => `- ${w}`);
  return [...added, ...removed].join(', ');
}

export interface GpuTaskSpec {
  readonly slot: string;
  readonly host: Host;
  /** The slot's rootfs task: a new rootfs decides afresh whether the slot has GPUs. */
  readonly rootfs: TaskRef;
  /** Host paths: the grants the bundle reads, the discovery they came from, the slot's config.json. */
  readonly grantsFile: string;
  readonly seenFile: string;
  readonly configJson: string;
}

/** `<slot>/gpu`: the slot's grants, from a discovery that its check makes again on every run. */
export function gpuTask(ng: NodefileApi, spec: GpuTaskSpec): TaskRef {
  const rootfsId = spec.rootfs.id;
  return ng.task(`${spec.slot}/gpu`, {
    description: `NVIDIA devices and driver libraries granted to ${spec.slot}, discovered on the host`,
    inputs: { rootfs: spec.rootfs, spec: ng.value({ slot: spec.slot, root: spec.host.root }) },
    // Only the grants are an output, so what consumes them follows them alone; the discovery they came from
    // is the check's memory of the host, removed with the task.
    outputs: [spec.grantsFile],
    run: (ctx) => {
      const found = discoverNvidia(spec.host);
      const before = readJson(spec.grantsFile, grantsSchema, 'the GPU grants file');
      const granted = decideGranted({
        before,
        newRootfs: before !== undefined && ctx.changedUpstream.includes(rootfsId),
        bundleGrants: bundleGrantsNvidia(spec.configJson),
        found,
      });
      const grants: GpuGrants = granted ? { granted, ...found } : NO_GRANTS;
      renderFile(spec.grantsFile, `${JSON.stringify(grants, null, 2)}\n`);
      renderFile(spec.seenFile, `${JSON.stringify(found, null, 2)}\n`);
      if (!granted && found.devices.length > 0) ctx.log(leftAlone(spec.slot, found));
      else ctx.log(grants.devices.length === 0 ? 'no NVIDIA devices granted' : `granted ${grants.devices.map(describeDevice).join(', ')} and ${grants.mounts.length} driver files`);
    },
    check: () => {
      const seen = readJson(spec.seenFile, discoverySchema, 'the GPU discovery file');
      if (seen === undefined) return `${spec.seenFile} is missing`;
      const now = discoverNvidia(spec.host);
      const change = describeChange(seen, now);
      if (change === '') return true;
      if (readGrants(spec.grantsFile).granted) return `NVIDIA devices or driver libraries changed on the host: ${change}`;
      // Not granted: only a GPU appearing is worth saying; the rest does not touch the slot.
      return now.devices.length === 0 || leftAlone(spec.slot, now);
    },
    destroy: [['rm', '-f', spec.seenFile]],
    verbs: { create: 'discover', update: 'discover' },
  });
}

const leftAlone = (slot: string, found: GpuDiscovery): string =>
  `an NVIDIA GPU is on the host (${found.devices.map(describeDevice).join(', ')}), but ${slot}'s rootfs was made without GPU grants: ` +
  `${slot} is left alone; adding a GPU needs a new rootfs (a new image, or a switch to a slot built afresh)`;

// ---- the NVIDIA state inside the running node -----------------------------------

/** Recreates each granted device node inside the container with its major, minor and mode, then ldconfig. */
export function deviceNodesArgv(runc: RuncOptions, id: string, devices: readonly Device[]): string[] {
  const script =
    'while [ $# -gt 0 ]; do rm -f "$1" && mkdir -p "${1%/*}" && mknod -m "$5" "$1" "$2" "$3" "$4" || exit 1; shift 5; done; ldconfig';
  const args = devices.flatMap((d) => [d.path, d.type, String(d.major), String(d.minor), ((d.fileMode ?? 0o666) & 0o7777).toString(8)]);
  return execInArgv(runc, id, ['sh', '-c', script, 'sh', ...args]);
}

/** `stat` of each granted device node inside: true when each is a character device with its numbers and mode. */
export async function deviceNodesInPlace(exec: Exec, runc: RuncOptions, id: string, devices: readonly Device[]): Promise<true | string> {
  if (devices.length === 0) return true;
  const r = await tryExec(exec, execInArgv(runc, id, ['stat', '-c', '%n %F %t %T %a', ...devices.map((d) => d.path)]));
  if (r.exitCode !== 0) return `NVIDIA device nodes in ${id}: ${lastLine(r) || `stat exit ${r.exitCode}`}`;
  const wrong: string[] = [];
  const lines = r.stdout.trim().split('\n');
  devices.forEach((d, i) => {
    const want = `${d.path} character special file ${d.major.toString(16)} ${d.minor.toString(16)} ${((d.fileMode ?? 0o666) & 0o7777).toString(8)}`;
    if (lines[i] !== want) wrong.push(`${d.path} is "${lines[i] ?? ''}", not "${want}"`);
  });
  return wrong.length === 0 || `NVIDIA device nodes in ${id}: ${wrong.join('; ')}`;
}

export interface NvidiaTaskSpec {
  readonly slot: string;
  /** runc's id of the slot's container. */
  readonly containerId: string;
  readonly runc: RuncOptions;
  /** The container task: each start of the container rebuilds the state inside. */
  readonly container: TaskRef;
  readonly gpu: TaskRef;
  readonly grantsFile: string;
}

/**
 * `<slot>/nvidia`: after each start of a GPU node, containerd and kubelet are stopped, the device nodes
 * recreated from the grants (and the linker cache rebuilt for the driver libraries), and both started again,
 * so neither runs on NVIDIA state older than the container. Without grants it does nothing.
 */
export function nvidiaTask(ng: NodefileApi, spec: NvidiaTaskSpec): TaskRef {
  const systemd = { kind: 'container' as const, runc: spec.runc, id: spec.containerId };
  return ng.task(`${spec.slot}/nvidia`, {
    description: `the NVIDIA state inside ${spec.slot} (device nodes, linker cache), with containerd and kubelet stopped around it`,
    inputs: { container: spec.container, grants: spec.gpu.output(spec.grantsFile) },
    run: async (ctx) => {
      const { devices } = readGrants(spec.grantsFile);
      if (devices.length === 0) {
        ctx.log('no NVIDIA devices granted: nothing to do');
        return { devices: 0 };
      }
      const exec = execOf(ctx);
      const svc = services(exec, systemd);
      // Those systemd started with the container; a new rootfs has none enabled until their tasks run.
      const running: string[] = [];
      for (const unit of ['kubelet', 'containerd']) if (await svc.isEnabled(unit)) running.push(unit);
      for (const unit of running) await svc.stop(unit);
      await exec(deviceNodesArgv(spec.runc, spec.containerId, devices));
      for (const unit of [...running].reverse()) await svc.start(unit);
      ctx.log(`rebuilt ${devices.length} NVIDIA device nodes${running.length === 0 ? '' : `; stopped and started ${running.join(', ')}`}`);
      return { devices: devices.length };
    },
    check: (ctx) => deviceNodesInPlace(execOf(ctx), spec.runc, spec.containerId, readGrants(spec.grantsFile).devices),
    verbs: { create: 'rebuild', update: 'rebuild' },
  });
}

/** The host paths of a slot's GPU files, in its folder (removed with it). */
export const gpuFiles = (slotDir: string) => ({
  grantsFile: path.join(slotDir, 'gpu.json'),
  seenFile: path.join(slotDir, 'gpu.host.json'),
});
