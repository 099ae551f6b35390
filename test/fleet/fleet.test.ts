// The Ansible collection (ansible/ansible_collections/nodegraph/node) rolling a change across six
// simulated nodes on this machine: each its own root prefix (executable, graph, state folder, the
// example's services and their pidfiles), node3 reached over real ssh (an sshd on 127.0.0.1 with a
// host key and a client key made here), the others over Ansible's local connection. The change:
// containerd's log level, info → debug; the fault: node3's level "loud", which its graph refuses,
// so its atomic apply is rolled back.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { alive, repo } from '../support/rig.ts';
import { describeTree } from '../support/tree.ts';

const NODES = ['node1', 'node2', 'node3', 'node4', 'node5', 'node6'];
const SSH_NODE = 'node3';
const COLLECTIONS = path.join(repo, 'ansible');
const PLAYBOOK = path.join(COLLECTIONS, 'ansible_collections/nodegraph/node/playbooks/rollout.yml');

let base = '';
const at = (...parts: string[]): string => path.join(base, ...parts);
const root = (node: string): string => at('nodes', node);

let EXECUTABLE = '';

function run(argv: readonly string[], env: Record<string, string> = {}, cwd = base, input?: string): { code: number | null; out: string } {
  const result = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env: { ...process.env, ...env }, cwd, ...(input === undefined ? {} : { input }) });
  return { code: result.status, out: `${result.stdout}${result.stderr}` };
}

function must(argv: readonly string[], cwd = base): string {
  const result = run(argv, {}, cwd);
  if (result.code !== 0) throw new Error(`${argv.join(' ')}: exit ${result.code}\n${result.out}`);
  return result.out;
}

// --- sshd on 127.0.0.1, a port of its own -------------------------------------------------------

let sshd: ChildProcess | undefined;
let sshPort = 0;

async function sparePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

async function startSshd(): Promise<void> {
  mkdirSync(at('ssh'), { mode: 0o700 });
  mkdirSync('/run/sshd', { recursive: true }); // sshd's privilege separation folder
  must(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'fleet-host', '-f', at('ssh/host_key')]);
  must(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'fleet-client', '-f', at('ssh/id')]);
  cpSync(at('ssh/id.pub'), at('ssh/authorized_keys'));
  sshPort = await sparePort();
  writeFileSync(at('ssh/known_hosts'), `[127.0.0.1]:${sshPort} ${readFileSync(at('ssh/host_key.pub'), 'utf8')}`);
  writeFileSync(
    at('ssh/sshd_config'),
    [
      `Port ${sshPort}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${at('ssh/host_key')}`,
      `AuthorizedKeysFile ${at('ssh/authorized_keys')}`,
      `PidFile ${at('ssh/sshd.pid')}`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  sshd = spawn('/usr/sbin/sshd', ['-D', '-E', at('ssh/sshd.log'), '-f', at('ssh/sshd_config')], { stdio: 'ignore' });
  const end = Date.now() + 20_000;
  while (!(await accepts(sshPort))) {
    if (sshd.exitCode !== null || Date.now() > end) throw new Error(`sshd did not start:\n${readFileSync(at('ssh/sshd.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// --- the inventory, one per phase ---------------------------------------------------------------

function inventory(logLevel: string, faultOn: string | undefined): string {
  const file = at('inventory.yml');
  const hosts = NODES.map((node, i) => {
    const vars = [`max_pods: ${101 + i}`];
    if (node === faultOn) vars.push('fault: true');
    if (node === SSH_NODE) {
      vars.push(
        'ansible_connection: ssh',
        'ansible_host: 127.0.0.1',
        `ansible_port: ${sshPort}`,
        'ansible_user: root',
        `ansible_ssh_private_key_file: ${at('ssh/id')}`,
        `ansible_ssh_common_args: "-o UserKnownHostsFile=${at('ssh/known_hosts')} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"`,
      );
    }
    return `    ${node}: {${vars.join(', ')}}`;
  });
  writeFileSync(
    file,
    [
      'fleet:',
      '  vars:',
      '    ansible_connection: local',
      '    ansible_python_interpreter: /usr/bin/python3',
      `    nodegraph_root: "${base}/nodes/{{ inventory_hostname }}"`,
      `    nodegraph_executable_src: ${EXECUTABLE}`,
      `    nodegraph_graph_src: ${at('graph')}`,
      `    log_level: ${logLevel}`,
      '    nodegraph_metrics_file: "{{ nodegraph_root }}/var/lib/node_exporter/textfile/nodegraph.prom"',
      '    nodegraph_files:',
      // One expression, so maxPods stays a number in the JSON.
      `      example/settings.json: "{{ {'containerd': {'registryMirrors': {'docker.io': ['https://mirror.example.internal']}, 'logLevel': 'loud' if fault | default(false) else log_level}, 'kubelet': {'clusterDNS': ['10.96.0.10'], 'maxPods': max_pods | int}} | to_nice_json }}"`,
      '  hosts:',
      ...hosts,
      '',
    ].join('\n'),
  );
  return file;
}

function playbook(logLevel: string, faultOn: string | undefined, ...extra: string[]): { code: number | null; out: string } {
  const env = {
    ANSIBLE_COLLECTIONS_PATH: COLLECTIONS,
    ANSIBLE_HOME: at('ansible-home'),
    ANSIBLE_LOCAL_TEMP: at('tmp'),
    // No ssh master left behind to outlive the test's sshd.
    ANSIBLE_SSH_ARGS: '-o ControlMaster=no',
    ANSIBLE_RETRY_FILES_ENABLED: 'false',
    ANSIBLE_NOCOLOR: '1',
    ANSIBLE_DEPRECATION_WARNINGS: 'false',
    TMPDIR: at('tmp'),
  };
  return run(['ansible-playbook', '-i', inventory(logLevel, faultOn), PLAYBOOK, '-e', 'rollout_serial=2', '-e', 'rollout_max_fail_percentage=0', ...extra], env);
}

// --- what a node holds --------------------------------------------------------------------------

const graphDir = (node: string): string => path.join(root(node), 'opt/nodegraph');
const stateDir = (node: string): string => path.join(root(node), 'var/lib/nodegraph/state');

function generation(node: string): number | null {
  const out = must([EXECUTABLE, 'generations', '--json', '-f', path.join(graphDir(node), 'Nodefile.ts'), '--state-dir', stateDir(node)]);
  return (JSON.parse(out) as { current: number | null }).current;
}

const pid = (node: string, service: string): number => Number(readFileSync(path.join(graphDir(node), `example-node/run/${service}.pid`), 'utf8'));
const logLevel = (node: string): string => /level = "(\w+)"/.exec(readFileSync(path.join(graphDir(node), 'example-node/etc/containerd.toml'), 'utf8'))![1]!;

/** Every entry below the node's root, by type, mode, owner and content; the hash cache (a cache of file hashes keyed by their stat, not state) left out. */
function files(node: string, withHashCache = true): Record<string, string> {
  const tree = describeTree(root(node));
  if (!withHashCache) for (const key of Object.keys(tree)) if (/var\/lib\/nodegraph\/state\/hashcache(\.delta)?$/.test(key)) delete tree[key];
  return tree;
}

/** The node's metrics file, once promtool has passed it. */
function metrics(node: string): string {
  const text = readFileSync(path.join(root(node), 'var/lib/node_exporter/textfile/nodegraph.prom'), 'utf8');
  const check = run(['promtool', 'check', 'metrics'], {}, base, text);
  expect(check.code, `${node}: ${check.out}`).toBe(0);
  return text;
}
const outcome = (node: string): string | undefined => /^nodegraph_last_run_outcome\{command="apply",outcome="([a-z-]+)"\} 1$/m.exec(metrics(node))?.[1];

/** The recap's line for a host: its counts by name. */
function recap(out: string, node: string): Record<string, number> {
  const line = new RegExp(`^${node}\\s+: (.*)$`, 'm').exec(out);
  if (!line) throw new Error(`no recap for ${node} in:\n${out}`);
  return Object.fromEntries([...line[1]!.matchAll(/(\w+)=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

/** The summary's line for a host. */
const summary = (out: string, node: string): string | undefined => new RegExp(`${node}: generation [^\\\\"]*`).exec(out)?.[0];

beforeAll(async () => {
  base = mkdtempSync(path.join(tmpdir(), 'nodegraph-fleet-'));
  // What every node runs: the single-file executable (the role copies it to each node).
  must(['npm', 'run', 'build:sea'], repo);
  EXECUTABLE = path.join(repo, 'dist/nodegraph');
  mkdirSync(at('tmp'));
  mkdirSync(at('graph/example'), { recursive: true });
  cpSync(path.join(repo, 'Nodefile.example.ts'), at('graph/Nodefile.ts'));
  cpSync(path.join(repo, 'example/os-image.tar.gz'), at('graph/example/os-image.tar.gz'));
  await startSshd();
});

afterAll(() => {
  if (base === '') return;
  if (sshd?.pid !== undefined) process.kill(sshd.pid, 'SIGTERM');
  for (const node of NODES) {
    const nodefile = path.join(graphDir(node), 'Nodefile.ts');
    run([EXECUTABLE, 'destroy', '--yes', '-f', nodefile, '--state-dir', stateDir(node)]);
  }
  rmSync(base, { recursive: true, force: true });
});

describe('a rolling change across six nodes', () => {
  const before: Record<string, Record<string, string>> = {};
  const pids: Record<string, number[]> = {};

  test('the first rollout installs and converges every node, node3 over ssh', () => {
    const result = playbook('info', undefined);
    expect(result.code, result.out).toBe(0);
    for (const node of NODES) {
      expect(generation(node)).toBe(1);
      expect(logLevel(node)).toBe('info');
      expect(alive(pid(node, 'containerd')) && alive(pid(node, 'kubelet'))).toBe(true);
      expect(summary(result.out, node)).toBe(`${node}: generation 1 (changed)`);
      expect(outcome(node)).toBe('success');
    }
    // Each node its own services: six containerd stand-ins, six pids.
    expect(new Set(NODES.map((n) => pid(n, 'containerd'))).size).toBe(6);
    // node3 was reached over ssh, with the key made here.
    expect(readFileSync(at('ssh/sshd.log'), 'utf8')).toMatch(/Accepted publickey for root from 127\.0\.0\.1 port \d+ ssh2: ED25519/);
  });

  test('--check --diff shows each host its plan and changes nothing anywhere', () => {
    for (const node of NODES) before[node] = files(node, false);
    const result = playbook('debug', undefined, '--check', '--diff');
    expect(result.code, result.out).toBe(0);
    // The diff printed right before a host's "changed" line is that host's plan.
    const converge = result.out.split(/^TASK \[nodegraph\.node\.node : Converge the node\] \*+$/m).slice(1).join('');
    const plans: Record<string, string> = {};
    let block = '';
    for (const line of converge.split('\n')) {
      const host = /^(?:changed|ok): \[(\w+)\]$/.exec(line);
      if (host) (plans[host[1]!] = block), (block = '');
      else block += `${line}\n`;
    }
    for (const node of NODES) {
      expect(plans[node], `no plan for ${node} in:\n${result.out}`).toContain('containerd/config update (input settings changed: logLevel: "info" → "debug")');
      expect(plans[node]).toContain('-        "logLevel": "info",');
      expect(plans[node]).toContain('+        "logLevel": "debug",');
      expect(plans[node]).not.toContain('kubelet/');
      expect(summary(result.out, node)).toBe(`${node}: generation 1 (would change)`);
      expect(files(node, false)).toEqual(before[node]);
      expect(generation(node)).toBe(1);
    }
  });

  test('serial 2, no failure allowed, a fault on node3: 1-2 move, 3 rolls back, 4-6 untouched, the playbook names node3', () => {
    for (const node of NODES) {
      before[node] = files(node);
      pids[node] = [pid(node, 'containerd'), pid(node, 'kubelet')];
    }
    const result = playbook('debug', 'node3');
    expect(result.code, result.out).not.toBe(0);
    expect(result.out).toMatch(/fatal: \[node3\]: FAILED! => \{"changed": false, "msg": "the rollout stopped at node3: containerd\/config: containerd\.logLevel must be one of trace, debug, info, warn, error, fatal, panic, not \\"loud\\"; rolled back, generation 1 is current"\}/);
    expect(recap(result.out, 'node3').failed).toBe(1);
    for (const node of ['node1', 'node2']) {
      expect(generation(node)).toBe(2);
      expect(logLevel(node)).toBe('debug');
      expect(summary(result.out, node)).toBe(`${node}: generation 2 (changed)`);
      expect(recap(result.out, node).failed).toBe(0);
      expect(outcome(node)).toBe('success');
    }
    expect(outcome('node3')).toBe('rolled-back');
    expect(metrics('node3')).toMatch(/^nodegraph_rollbacks_total\{cause="failed-apply"\} 1$/m);
    expect(metrics('node3')).toMatch(/^nodegraph_generation 1$/m);
    expect(generation('node3')).toBe(1);
    expect(logLevel('node3')).toBe('info');
    expect(JSON.parse(readFileSync(path.join(graphDir('node3'), 'example/settings.json'), 'utf8')).containerd.logLevel).toBe('info');
    // Its services never stopped: the same processes, running.
    expect([pid('node3', 'containerd'), pid('node3', 'kubelet')]).toEqual(pids.node3);
    expect(pids.node3!.every(alive)).toBe(true);
    expect(summary(result.out, 'node3')).toMatch(/^node3: generation 1 \(rolled back: containerd\/config: /);
    for (const node of ['node4', 'node5', 'node6']) {
      expect(generation(node)).toBe(1);
      expect(files(node)).toEqual(before[node]);
      expect([pid(node, 'containerd'), pid(node, 'kubelet')]).toEqual(pids[node]);
    }
    // Their metrics are the first rollout's, untouched with the rest.
    expect(['node4', 'node5', 'node6'].map(outcome)).toEqual(['success', 'success', 'success']);
    expect(summary(result.out, 'node4')).toMatch(/^node4: generation 1 \(skipped: the rollout stopped before this host: node3: /);
    expect(summary(result.out, 'node5')).toBe('node5: generation 1 (not reached)');
    expect(summary(result.out, 'node6')).toBe('node6: generation 1 (not reached)');
  });

  test('the fault removed, the playbook converges every node; again, it changes nothing', () => {
    const result = playbook('debug', undefined);
    expect(result.code, result.out).toBe(0);
    for (const node of NODES) {
      expect(logLevel(node)).toBe('debug');
      expect(alive(pid(node, 'containerd')) && alive(pid(node, 'kubelet'))).toBe(true);
    }
    // node3's generation 2 is its failed change, kept; its new one is 3.
    expect(NODES.map(generation)).toEqual([2, 2, 3, 2, 2, 2]);
    expect(summary(result.out, 'node1')).toBe('node1: generation 2 (unchanged)');
    expect(summary(result.out, 'node3')).toBe('node3: generation 3 (changed)');

    const again = playbook('debug', undefined);
    expect(again.code, again.out).toBe(0);
    for (const node of NODES) {
      expect(recap(again.out, node)).toMatchObject({ changed: 0, failed: 0, unreachable: 0 });
      expect(summary(again.out, node)).toMatch(new RegExp(`^${node}: generation \\d \\(unchanged\\)$`));
      expect(outcome(node)).toBe('success');
    }
  });
});
