// The Ansible collection's rolling playbook on two real container nodes: each host runs
// graphs/container-node.ts on runc (the e2e image) through the single-file executable
// (dist/nodegraph), over Ansible's local connection, with its own root prefix (runc's state
// folder below it), state folder and container ids (`fleet1-{slot}`, `fleet2-{slot}`).
// The change: kubelet's maxPods, 110 → 120, one host after the other; the fault: a kernel module
// fleet2 cannot load, which fails its atomic apply there, so the change is rolled back on it.
//
// The graph folder the role installs holds a Nodefile that re-exports this checkout's
// graphs/container-node.ts (the role copies a folder file by file: the 150 files of graphs/ and
// src/ would cost Ansible about a minute a host a run) and the node's JSON, rendered per host.
//
// Run (as root): npx vitest run --project e2e test/e2e/fleet.test.ts (ansible-core; see test/e2e/README.md)

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeConfigInput } from '../../graphs/node-config.ts';
import {
  cgroupsNamed,
  cleanWorkDir,
  ensureImage,
  FLEET_PREFIX,
  makeWorkDir,
  mountsBelow,
  must,
  Node,
  processesRootedBelow,
  reapStaleWorkDirs,
  sh,
} from './node-host.ts';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const EXECUTABLE = path.join(REPO, 'dist/nodegraph');
const COLLECTIONS = path.join(REPO, 'ansible');
const PLAYBOOK = path.join(COLLECTIONS, 'ansible_collections/nodegraph/node/playbooks/rollout.yml');
const HOSTS = ['fleet1', 'fleet2'] as const;
type Host = (typeof HOSTS)[number];
/** Built into this host's kernel (see node.test.ts). */
const MODULES = ['overlay', 'bridge'];
const NO_SUCH_MODULE = 'nodegraph_e2e_no_such_module';

let work = '';
let image = '';
const timings: string[] = [];

const rootOf = (host: Host): string => path.join(work, host, 'root');
const runcRootOf = (host: Host): string => path.join(rootOf(host), 'run/runc');
const graphDir = (host: Host): string => path.join(rootOf(host), 'opt/nodegraph');
// Not the role's default (/var/lib/nodegraph), which holds the node's layout (/var/lib/nodegraph/containers).
const stateDir = (host: Host): string => path.join(rootOf(host), 'var/lib/nodegraph/state');
const nodeOf = (host: Host): Node => new Node(runcRootOf(host), `${host}-kube1`);

/** The node's configuration: its own name, root prefix and container ids. */
function nodeConfig(host: Host, maxPods: number, fault: boolean): NodeConfigInput {
  return {
    nodeName: `e2e-${host}`,
    cluster: { server: 'https://10.0.0.1:6443', caData: '-----BEGIN CERTIFICATE-----\nMIIBnodegraphe2e\n-----END CERTIFICATE-----\n', bootstrapToken: 'abcdef.0123456789abcdef' },
    clusterDNS: ['10.96.0.10'],
    kubernetesVersion: 'v1.30.2',
    image,
    slot: 'kube1',
    containerId: `${host}-{slot}`,
    root: rootOf(host),
    runtime: { runc: must(['sh', '-c', 'command -v runc']).trim() },
    supervisor: 'runc',
    hostNetwork: false,
    gpu: 'off',
    kernelModules: fault ? [...MODULES, NO_SUCH_MODULE] : MODULES,
    kubelet: { extra: { maxPods } },
    timeouts: { systemd: 120, service: 60, stop: 60, interval: 0.2, healthy: 2 },
  };
}

/** Runs the rolling playbook (both hosts in one batch, changed one after the other); its exit code, output and time. */
function rollout(what: string, maxPods: number, faultOn?: Host): { code: number | null; out: string } {
  const inventory = path.join(work, 'inventory.yml');
  const hosts = Object.fromEntries(HOSTS.map((h) => [h, { nodegraph_root: rootOf(h), node: nodeConfig(h, maxPods, h === faultOn) }]));
  // JSON is YAML: the node's configuration goes in as data, rendered by the role with to_nice_json.
  const fleet = {
    fleet: {
      vars: {
        ansible_connection: 'local',
        ansible_python_interpreter: '/usr/bin/python3',
        nodegraph_executable_src: EXECUTABLE,
        nodegraph_graph_src: path.join(work, 'graph'),
        nodegraph_files: { 'node.json': '{{ node | to_nice_json }}' },
        nodegraph_environment: { NODEGRAPH_NODE_CONFIG: '{{ nodegraph_graph_dir }}/node.json' },
      },
      hosts,
    },
  };
  writeFileSync(inventory, `${JSON.stringify(fleet, null, 2)}\n`);
  const env = {
    ...process.env,
    ANSIBLE_COLLECTIONS_PATH: COLLECTIONS,
    ANSIBLE_HOME: path.join(work, 'ansible-home'),
    ANSIBLE_LOCAL_TEMP: path.join(work, 'tmp'),
    ANSIBLE_RETRY_FILES_ENABLED: 'false',
    ANSIBLE_NOCOLOR: '1',
    ANSIBLE_DEPRECATION_WARNINGS: 'false',
    TMPDIR: path.join(work, 'tmp'),
  };
  const started = Date.now();
  const r = spawnSync('ansible-playbook', ['-i', inventory, PLAYBOOK, '-e', 'rollout_serial=2', '-e', 'rollout_max_fail_percentage=0'], { encoding: 'utf8', env });
  timings.push(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** The executable on a host's graph and state, as the role runs it. */
function nodegraph(host: Host, ...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(EXECUTABLE, [...args, '-f', path.join(graphDir(host), 'Nodefile.ts'), '--state-dir', stateDir(host)], {
    encoding: 'utf8',
    env: { ...process.env, NODEGRAPH_NODE_CONFIG: path.join(graphDir(host), 'node.json') },
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

function generation(host: Host): number | null {
  const r = nodegraph(host, 'generations', '--json');
  expect(r.code, r.out).toBe(0);
  return (JSON.parse(r.out) as { current: number | null }).current;
}

/** The recap's line for a host: its counts by name. */
function recap(out: string, host: Host): Record<string, number> {
  const line = new RegExp(`^${host}\\s+: (.*)$`, 'm').exec(out);
  if (!line) throw new Error(`no recap for ${host} in:\n${out}`);
  return Object.fromEntries([...line[1]!.matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

/** The playbook's summary line for a host. */
const summary = (out: string, host: Host): string | undefined => new RegExp(`${host}: generation [^\\\\"]*`).exec(out)?.[0];

/** What runs in a host's node: runc's view of its container and the services' invocation ids (new with each start). */
function running(host: Host): { pid: number; created: string; containerd: string; kubelet: string } {
  const node = nodeOf(host);
  const state = node.state();
  expect(state?.status, `${node.id} in runc`).toBe('running');
  return { pid: state!.pid, created: state!.created, containerd: node.showValue('containerd', 'InvocationID'), kubelet: node.showValue('kubelet', 'InvocationID') };
}

/** systemd running, containerd answering, kubelet active: asked inside the node. */
function expectHealthy(host: Host): void {
  const node = nodeOf(host);
  expect(node.systemState(), `${host}: systemctl is-system-running`).toBe('running');
  expect(node.exec('ctr', 'version').code, `${host}: ctr version`).toBe(0);
  expect([node.isActive('containerd'), node.isActive('kubelet')], host).toEqual(['active', 'active']);
}

const maxPods = (host: Host): string | undefined => /^maxPods: (\d+)$/m.exec(nodeOf(host).mustExec('cat', '/var/lib/kubelet/config.yaml'))?.[1];

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the e2e suite needs root (runc, mounts): run it as root');
  if (sh(['ansible-playbook', '--version']).code !== 0) throw new Error('ansible-playbook is not installed (apt-get install ansible-core; .ci/run does it)');
  for (const line of reapStaleWorkDirs((dir) => HOSTS.map((h) => path.join(dir, h, 'root/run/runc')), FLEET_PREFIX)) console.warn(`[e2e fleet] reaped: ${line}`);
  image = (await ensureImage()).archive;
  // The single-file executable, built again only when its inputs changed.
  execFileSync(process.execPath, [path.join(REPO, 'scripts/build-sea.ts'), '--if-stale'], { stdio: 'inherit' });
  work = makeWorkDir(FLEET_PREFIX);
  mkdirSync(path.join(work, 'tmp'));
  mkdirSync(path.join(work, 'graph'));
  writeFileSync(path.join(work, 'graph/Nodefile.ts'), `export { default } from ${JSON.stringify(path.join(REPO, 'graphs/container-node.ts'))};\n`);
  for (const host of HOSTS) mkdirSync(rootOf(host), { recursive: true });
});

afterAll(() => {
  if (work === '') return;
  for (const host of HOSTS) if (processesRootedBelow(rootOf(host)).length > 0) nodegraph(host, 'destroy', '--yes');
  for (const line of cleanWorkDir(work, HOSTS.map(runcRootOf), { keep: process.env['NODEGRAPH_E2E_KEEP'] === '1' })) console.warn(`[e2e fleet] cleanup: ${line}`);
  console.info(`[e2e fleet] timings:\n  ${timings.join('\n  ')}`);
});

describe('the rolling playbook on two container nodes (runc, the single executable, Ansible local connection)', () => {
  let before: ReturnType<typeof running>;

  it('the first rollout brings both nodes up, each its own container', () => {
    const result = rollout('first rollout (both nodes unpacked, booted, healthy)', 110);
    expect(result.code, result.out).toBe(0);
    for (const host of HOSTS) {
      expectHealthy(host);
      expect(maxPods(host)).toBe('110');
      expect(generation(host)).toBe(1);
      expect(summary(result.out, host)).toBe(`${host}: generation 1 (changed)`);
    }
    // Each host's runc state folder knows its own container and no other.
    for (const host of HOSTS) expect(nodeOf(host).runc('list', '-q').stdout.trim()).toBe(`${host}-kube1`);
  });

  it('the change rolls to fleet1; made to fail on fleet2 it is rolled back there, its container and services still running, and the playbook names it', () => {
    before = running('fleet2');
    const result = rollout('maxPods 120, the fault on fleet2 (rolled back there)', 120, 'fleet2');
    expect(result.code, result.out).not.toBe(0);
    expect(result.out).toMatch(
      new RegExp(`fatal: \\[fleet2\\]: FAILED! => \\{"changed": false, "msg": "the rollout stopped at fleet2: host/kernel-modules: kernel module ${NO_SUCH_MODULE} is neither loaded nor built in [^"]*; rolled back, generation 1 is current"\\}`),
    );
    expect(recap(result.out, 'fleet2').failed).toBe(1);
    expect(recap(result.out, 'fleet1').failed).toBe(0);
    expect(generation('fleet1')).toBe(2);
    expect(maxPods('fleet1')).toBe('120');
    expectHealthy('fleet1');
    expect(summary(result.out, 'fleet1')).toBe('fleet1: generation 2 (changed)');
    // fleet2: the generation and the kubelet configuration it had; the same container and containerd, running. (The
    // rollback stops and starts again what the change meant to run: kubelet, whose configuration changed.)
    expect(generation('fleet2')).toBe(1);
    expect(summary(result.out, 'fleet2')).toMatch(/^fleet2: generation 1 \(rolled back: host\/kernel-modules: /);
    expect(maxPods('fleet2')).toBe('110');
    const after = running('fleet2');
    expect({ pid: after.pid, created: after.created, containerd: after.containerd }).toEqual({ pid: before.pid, created: before.created, containerd: before.containerd });
    expectHealthy('fleet2');
  });

  it('the fault taken away, the playbook converges fleet2; run again, it changes nothing', () => {
    const result = rollout('converge (fleet2 changes)', 120);
    expect(result.code, result.out).toBe(0);
    // fleet2's generation 2 is its rolled-back change, kept; the change is its generation 3.
    expect(HOSTS.map(generation)).toEqual([2, 3]);
    expect(summary(result.out, 'fleet1')).toBe('fleet1: generation 2 (unchanged)');
    expect(summary(result.out, 'fleet2')).toBe('fleet2: generation 3 (changed)');
    expect(maxPods('fleet2')).toBe('120');
    for (const host of HOSTS) expectHealthy(host);
    // maxPods alone: kubelet restarted, the container and containerd as they were.
    const now = running('fleet2');
    expect({ pid: now.pid, created: now.created, containerd: now.containerd }).toEqual({ pid: before.pid, created: before.created, containerd: before.containerd });
    expect(now.kubelet).not.toBe(before.kubelet);

    const again = rollout('again (nothing to do)', 120);
    expect(again.code, again.out).toBe(0);
    for (const host of HOSTS) {
      expect(recap(again.out, host)).toMatchObject({ changed: 0, failed: 0, unreachable: 0 });
      expect(summary(again.out, host)).toBe(`${host}: generation ${host === 'fleet1' ? 2 : 3} (unchanged)`);
    }
  });

  it('destroy on both: no container, mount, cgroup or process of either node, and status finds nothing', () => {
    for (const host of HOSTS) {
      const started = Date.now();
      const destroyed = nodegraph(host, 'destroy', '--yes');
      timings.push(`destroy ${host}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
      expect(destroyed.code, destroyed.out).toBe(0);
      expect(nodeOf(host).state()).toBeUndefined();
      expect(processesRootedBelow(rootOf(host))).toEqual([]);
      expect(cgroupsNamed(`${host}-kube1`)).toEqual([]);
      const status = nodegraph(host, 'status', '--json');
      expect(status.code, status.out).toBe(0);
      const { counts, tasks } = JSON.parse(status.out) as { counts: Record<string, number>; tasks: { id: string; status: string }[] };
      expect(tasks.filter((t) => t.status !== 'absent'), status.out).toEqual([]);
      expect(counts).toMatchObject({ trace: 0, orphan: 0 });
    }
    expect(mountsBelow(work)).toEqual([]);
    // What Ansible installed stays (the executable, the graph, the state folder); the node's rootfs and bundle go.
    for (const host of HOSTS) expect(existsSync(path.join(rootOf(host), 'var/lib/nodegraph/containers'))).toBe(false);
  });
});
