import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { discoverNvidia, splitDevice } from '../../../src/node/gpu.ts';
import { makeHost } from '../../../src/node/host.ts';
import { binarySourceSchema, formatOf, install, isPresent, type InstallSpec } from '../../../src/node/provision.ts';
import { realExec, scriptedExec } from '../../support/exec.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-gpu-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('NVIDIA discovery', () => {
  it('finds nothing on a host without NVIDIA devices, even with driver files around', () => {
    mkdirSync(path.join(dir, 'dev'), { recursive: true });
    writeFileSync(path.join(dir, 'dev/nvidia0'), 'a regular file, not a device');
    mkdirSync(path.join(dir, 'usr/lib/x86_64-linux-gnu'), { recursive: true });
    writeFileSync(path.join(dir, 'usr/lib/x86_64-linux-gnu/libcuda.so.1'), '');
    expect(discoverNvidia(makeHost(dir))).toEqual({ devices: [], mounts: [] });
    expect(discoverNvidia(makeHost(path.join(dir, 'nowhere')))).toEqual({ devices: [], mounts: [] });
  });

  it.runIf(process.getuid?.() === 0)('grants NVIDIA character devices and mounts the driver libraries (root: mknod)', () => {
    mkdirSync(path.join(dir, 'dev'), { recursive: true });
    execFileSync('mknod', [path.join(dir, 'dev/nvidia0'), 'c', '195', '0']);
    execFileSync('mknod', [path.join(dir, 'dev/nvidiactl'), 'c', '195', '255']);
    execFileSync('mknod', [path.join(dir, 'dev/null-ish'), 'c', '1', '3']);
    mkdirSync(path.join(dir, 'usr/lib/x86_64-linux-gnu'), { recursive: true });
    writeFileSync(path.join(dir, 'usr/lib/x86_64-linux-gnu/libcuda.so.1'), '');
    writeFileSync(path.join(dir, 'usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54'), '');
    writeFileSync(path.join(dir, 'usr/lib/x86_64-linux-gnu/libc.so.6'), '');
    const found = discoverNvidia(makeHost(dir));
    expect(found.devices).toEqual([
      { path: '/dev/nvidia0', type: 'c', major: 195, minor: 0, fileMode: 0o666, uid: 0, gid: 0 },
      { path: '/dev/nvidiactl', type: 'c', major: 195, minor: 255, fileMode: 0o666, uid: 0, gid: 0 },
    ]);
    expect(found.mounts.map((m) => [m.destination, m.source])).toEqual([
      ['/usr/lib/x86_64-linux-gnu/libcuda.so.1', path.join(dir, 'usr/lib/x86_64-linux-gnu/libcuda.so.1')],
      ['/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54', path.join(dir, 'usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54')],
    ]);
  });

  it('splits device numbers the way glibc encodes them', () => {
    expect(splitDevice(BigInt(statSync('/dev/null').rdev))).toEqual({ major: 1, minor: 3 });
    // major 511, minor 65536: both use the high bits.
    const rdev = (511n & 0xfffn) << 8n | (65536n & 0xffn) | ((65536n & ~0xffn) << 12n) | ((511n & ~0xfffn) << 32n);
    expect(splitDevice(rdev)).toEqual({ major: 511, minor: 65536 });
  });
});

describe('provisioning binaries', () => {
  const spec = (source: string, version: string, over: Partial<InstallSpec> = {}): InstallSpec => ({
    name: 'kubelet',
    source: { version, source },
    dest: path.join(dir, 'rootfs/usr/local/bin/kubelet'),
    stamp: path.join(dir, 'rootfs/var/lib/nodegraph/provisioned/kubelet.json'),
    expect: [path.join(dir, 'rootfs/usr/local/bin/kubelet')],
    scratch: path.join(dir, 'downloads'),
    ...over,
  });

  it('installs a binary from a local file, then skips the same version', async () => {
    const src = path.join(dir, 'kubelet-v1.30.2');
    writeFileSync(src, '#!/bin/sh\necho kubelet\n');
    const s = spec(src, 'v1.30.2');
    expect(isPresent(s)).toBe(false);
    expect(await install(realExec(), s)).toEqual({ name: 'kubelet', version: 'v1.30.2', action: 'installed' });
    expect(statSync(s.dest).mode & 0o777).toBe(0o755);
    expect(JSON.parse(readFileSync(s.stamp, 'utf8')).version).toBe('v1.30.2');
    const { exec, calls } = scriptedExec(() => ({}));
    expect(await install(exec, s)).toMatchObject({ action: 'present' });
    expect(calls).toEqual([]);
    // A new version is installed over it.
    const newer = path.join(dir, 'kubelet-v1.31.0');
    writeFileSync(newer, '#!/bin/sh\necho newer\n');
    expect(await install(realExec(), spec(newer, 'v1.31.0'))).toMatchObject({ action: 'installed' });
    expect(readFileSync(s.dest, 'utf8')).toContain('newer');
  });

  it('reinstalls when the stamp is there but the file is not', async () => {
    const src = path.join(dir, 'k');
    writeFileSync(src, 'x');
    const s = spec(src, 'v1');
    await install(realExec(), s);
    rmSync(s.dest);
    expect(isPresent(s)).toBe(false);
    expect(await install(realExec(), s)).toMatchObject({ action: 'installed' });
  });

  it('unpacks an archive into a folder', async () => {
    const content = path.join(dir, 'cni');
    mkdirSync(content);
    writeFileSync(path.join(content, 'bridge'), 'b');
    writeFileSync(path.join(content, 'host-local'), 'h');
    const tgz = path.join(dir, 'cni-plugins-linux-amd64-v1.5.1.tgz');
    execFileSync('tar', ['-czf', tgz, '-C', content, '.']);
    const dest = path.join(dir, 'opt/cni/bin');
    const s = spec(tgz, 'v1.5.1', { name: 'cni-plugins', dest, stamp: path.join(dir, 'opt/cni/stamp.json'), expect: [path.join(dest, 'bridge')] });
    expect(formatOf(s.source)).toBe('tar');
    await install(realExec(), s);
    expect(existsSync(path.join(dest, 'host-local'))).toBe(true);
  });

  it('refuses a source whose sha256 is not the configured one, installing nothing', async () => {
    const src = path.join(dir, 'k');
    writeFileSync(src, 'tampered');
    const s = spec(src, 'v1');
    const bad = { ...s, source: { ...s.source, sha256: createHash('sha256').update('original').digest('hex') } };
    await expect(install(realExec(), bad)).rejects.toThrow(/has sha256 .* not the configured/);
    expect(existsSync(s.dest)).toBe(false);
  });

  it('names what a local source that is not there was for', async () => {
    const s = spec(path.join(dir, 'no such kubelet'), 'v1.30.2');
    await expect(install(realExec(), s)).rejects.toThrow(
      `could not read kubelet v1.30.2 from ${s.source.source}: ENOENT: no such file or directory, open '${s.source.source}'`,
    );
    expect(existsSync(s.dest)).toBe(false);
  });

  it('takes a configured sha256 written in capitals as the same digest', async () => {
    const src = path.join(dir, 'k');
    writeFileSync(src, 'original');
    const digest = createHash('sha256').update('original').digest('hex').toUpperCase();
    const source = binarySourceSchema.parse({ version: 'v1', source: src, sha256: digest });
    expect(await install(realExec(), { ...spec(src, 'v1'), source })).toMatchObject({ action: 'installed' });
  });

  it('downloads an https source with curl through the runner', async () => {
    const { exec, calls } = scriptedExec((argv) => {
      if (argv[0] === 'curl') writeFileSync(argv[argv.indexOf('--output') + 1]!, 'downloaded');
      return {};
    });
    const s = spec('https://dl.k8s.io/release/v1.30.2/bin/linux/amd64/kubelet', 'v1.30.2');
    expect(formatOf(s.source)).toBe('binary');
    await install(exec, s);
    expect(calls[0]?.[0]).toBe('curl');
    expect(readFileSync(s.dest, 'utf8')).toBe('downloaded');
    expect(existsSync(path.join(dir, 'downloads/kubelet-v1.30.2.download'))).toBe(false);
  });

  it('gives curl the URL on its standard input: credentials in it reach the server, not the command line ps shows', async () => {
    let asked: { url?: string; authorization?: string } = {};
    const server = createServer((req, res) => {
      asked = { url: req.url!, authorization: req.headers.authorization! };
      res.end('downloaded');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const calls: string[][] = [];
      const exec = realExec();
      const recorded: typeof exec = (argv, options) => (calls.push([...argv]), exec(argv, options));
      const s = spec(`http://robot:pass%22word@127.0.0.1:${port}/kubelet?token=secret-token`, 'v1');
      await install(recorded, s);
      expect(readFileSync(s.dest, 'utf8')).toBe('downloaded');
      expect(asked).toEqual({ url: '/kubelet?token=secret-token', authorization: `Basic ${Buffer.from('robot:pass"word').toString('base64')}` });
      expect(JSON.stringify(calls)).not.toMatch(/secret-token|pass/);
    } finally {
      server.close();
    }
  });
});
