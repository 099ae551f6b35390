// NVIDIA GPUs: find the device nodes and driver libraries on the host so the
// bundle can grant them. Discovery runs each time the graph is loaded, so a
// reboot or a driver change is followed; a host without NVIDIA devices gets
// nothing at all.

import { readdirSync, statSync } from 'node:fs';
import type { Device, Mount } from './bundle.ts';
import type { Host } from './host.ts';

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
