// The host networking a host-networked slot leaves, cleaned for real: a CNI
// bridge on this host (made here with iproute2, no traffic) and its
// host-local IPAM folder.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, expect, test } from 'vitest';
import type { Exec } from '../../../src/node/exec.ts';
import { cleanHostNetwork } from '../../../src/node/takeover.ts';

const bridge = `ngtst${process.pid % 10_000}`;
const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-takeover-'));
afterEach(() => {
  spawnSync('ip', ['link', 'delete', bridge]);
  rmSync(dir, { recursive: true, force: true });
});

const exec: Exec = async (argv) => {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
  return { exitCode: 0, stdout: r.stdout, stderr: r.stderr };
};

test('the old slot’s CNI bridge and its host-local IPAM state go; cleaning again finds nothing and fails not', async () => {
  const made = spawnSync('ip', ['link', 'add', bridge, 'type', 'bridge'], { encoding: 'utf8' });
  expect(made.status, `ip link add: ${made.stderr}`).toBe(0);
  const ipam = path.join(dir, 'var/lib/cni/networks/nodegraph');
  mkdirSync(ipam, { recursive: true });
  writeFileSync(path.join(ipam, '10.244.0.2'), 'pod\n');
  expect(existsSync(`/sys/class/net/${bridge}`)).toBe(true);
  await cleanHostNetwork(exec, { bridge, ipamDir: ipam });
  expect(existsSync(`/sys/class/net/${bridge}`)).toBe(false);
  expect(existsSync(ipam)).toBe(false);
  await cleanHostNetwork(exec, { bridge, ipamDir: ipam });
});
