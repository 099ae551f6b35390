// graphs/container-node.ts applied for real, as root, on this machine: the
// engine's real process runner, the host's runc (`runc run --detach`: this
// host runs no systemd), and the Debian image test/e2e/image/build-image.sh
// builds — systemd as PID 1 in the container, Debian's containerd inside it.
//
// THE KUBELET IS A STAND-IN. Kubernetes' kubelet is not packaged in Debian;
// the image carries /usr/local/bin/kubelet, a shell script that exits 1
// without its --config file and otherwise sleeps, under the real unit name
// kubelet.service. So "kubelet active" below proves that nodegraph wrote its
// configuration where kubelet reads it and started (or restarted) the unit;
// it proves nothing about a real kubelet joining a cluster.
//
// Every path goes below a temporary root (the host's /var/lib/kubelet, /opt/cni,
// /etc/containerd are not touched); runc's state is kept below it too, so
// `runc list` without --root does not show the node. Steps depend on each
// other and run in order; afterAll removes the container and unmounts and
// deletes the temporary root whatever happened (and the next run reaps the
// leftovers of a run that was killed before its afterAll).
//
// Run: npx vitest run --project e2e   (root; see test/e2e/README.md)
// NODEGRAPH_E2E_KEEP=1 keeps the temporary folder after a run, to look at (the container is still
// removed and mounts undone; the next run deletes the folder).

import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateNodeConfig, type NodeConfigInput } from '../../graphs/node-config.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import type { EngineEvent } from '../../src/events.ts';
import { applyNodefile, rollbackNodefile, type ApplySummary } from '../../src/apply.ts';
import { planNodefile, teardownNodefile } from '../../src/operations.ts';
import type { PlanEntry } from '../../src/plan/plan.ts';
import { containerUnit } from '../../src/node/supervise.ts';
import { readManifest } from '../support/generations.ts';
import { writeOciArchive } from '../support/oci-archive.ts';
import {
  cgroupsNamed,
  cleanWorkDir,
  dirsBelow,
  ensureImage,
  eventually,
  filesBelow,
  makeWorkDir,
  messageOf,
  mountsBelow,
  must,
  Node,
  processesRootedBelow,
  processesInGroup,
  processesWithEnv,
  reapStaleWorkDirs,
  RecordingRunner,
  sh,
  unitStory,
  type RuncState,
  type Sh,
} from './node-host.ts';

const NODEFILE = fileURLToPath(new URL('../../graphs/container-node.ts', import.meta.url));
const CLI = fileURLToPath(new URL('../../bin/nodegraph.js', import.meta.url));
const SLOT = 'kube1';
const UNITS = ['containerd.service', 'kubelet.service'];
/** The staged image archives' folder, a node path (below the root prefix on this host). */
const IMAGES = '/var/lib/nodegraph-e2e-images';
/** Built into this host's kernel (it has no loadable modules); elsewhere loaded, or modprobed. */
const MODULES = ['overlay', 'bridge'];
// Not a real CA: the stand-in kubelet never talks to an API server.
const CA = '-----BEGIN CERTIFICATE-----\nMIIBnodegraphe2e\n-----END CERTIFICATE-----\n';

const runcRootOf = (work: string): string => path.join(work, 'root/run/runc');

let work = '';
let root = '';
let stateDir = '';
let configFile = '';
let slotDir = '';
let imagesDir = '';
let config: NodeConfigInput;
let node: Node;
const runner = new RecordingRunner(new LocalRunner());
let events: EngineEvent[] = [];
const timings: string[] = [];
/** The manifest digest of the staged hello.tar. */
let helloDigest = '';
/** Set once the first apply brought the node up: later steps make no sense without it. */
let up = false;
/** Every folder and file below the root prefix before the first apply (the staged archive's), as `find` lists them. */
let rootBefore: string[] = [];

function writeConfig(change?: (c: NodeConfigInput) => NodeConfigInput): void {
  if (change !== undefined) config = change(config);
  const checked = validateNodeConfig(config);
  if (!checked.ok) throw new Error(`the test's node configuration is invalid: ${checked.error.join('; ')}`);
  writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`);
}

/** Told of each event as it happens (a step that times what it sees). */
let failedAt: ((e: EngineEvent) => void) | undefined;
const engine = () => ({
  nodefile: NODEFILE,
  stateDir,
  runner,
  jobs: 4,
  onEvent: (e: EngineEvent) => {
    events.push(e);
    failedAt?.(e);
  },
});

function failures(): string {
  return events
    .filter((e) => (e.type === 'task-done' && e.outcome === 'failed') || (e.type === 'destroy-done' && e.outcome === 'failed'))
    .map((e) => JSON.stringify(e, null, 2))
    .join('\n');
}

async function timed<T>(what: string, f: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await f();
  } finally {
    timings.push(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

/** An apply that may fail tasks: its summary. */
/** A failure here is reported as the task left it: not atomic, so nothing is undone. */
async function applyAllowingFailures(what: string, more: { replace?: string[] } = {}): Promise<ApplySummary> {
  return applyWith(what, { atomic: false, ...more });
}

async function applyWith(what: string, more: { replace?: string[]; atomic?: boolean }): Promise<ApplySummary> {
  runner.reset();
  events = [];
  const result = await timed(what, () => applyNodefile({ ...engine(), ...more }));
  if (!result.ok) {
    const steps = events.flatMap((e) => (e.type === 'task-done' || e.type === 'transaction' ? [`${e.type === 'task-done' ? `${e.id} ${e.outcome}` : e.message}`] : []));
    throw new Error(`apply failed: ${JSON.stringify(result.error, null, 2)}\nwhat happened:\n  ${steps.join('\n  ')}\ncommands:\n  ${runner.lines().join('\n  ')}`);
  }
  return result.value;
}

/** An apply as the node has it: atomic, its health waited for. */
async function apply(what: string, more: { replace?: string[] } = {}): Promise<ApplySummary> {
  const summary = await applyWith(what, more);
  if (summary.failed.length > 0) throw new Error(`apply: tasks failed: ${summary.failed.join(', ')}\n${failures()}`);
  return summary;
}

/** SHA-256 of every file the slots share at the same host paths (kubelet's pki, CNI, registry hosts), by path. */
function sharedFiles(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const dir of ['var/lib/kubelet/pki', 'opt/cni', 'etc/containerd/certs.d']) {
    const listed = sh(['sh', '-c', `cd ${JSON.stringify(path.join(root, dir))} 2>/dev/null && find . -type f -exec sha256sum {} + | sort`]);
    out[dir] = listed.stdout;
  }
  return out;
}

/**
 * Runs the nodegraph CLI on the suite's graph and state as a child process; with `killWhen`, polls it every
 * 10 ms with what the CLI printed so far, and kills the CLI with SIGKILL once it says so. How it ended:
 * `exit N` or a signal; its pid, which is also its process group's (it leads its own).
 */
async function runCli(
  args: string[],
  killWhen?: (output: string) => boolean,
  env: Record<string, string> = {},
): Promise<{ end: string; output: string; pid: number }> {
  const child = spawn(process.execPath, [CLI, ...args, '-f', NODEFILE, '--state-dir', stateDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    detached: true,
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const ended = new Promise<string>((resolve) => child.on('close', (code, signal) => resolve(signal ?? `exit ${code}`)));
  if (killWhen !== undefined) {
    const deadline = Date.now() + 120_000;
    while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) {
      if (killWhen(output)) {
        child.kill('SIGKILL');
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
  return { end: await ended, output, pid: child.pid ?? 0 };
}

/** Folders and files below `dir`, relative to it (`find`'s view, sorted). */
const findBelow = (dir: string): string[] => [...dirsBelow(dir), ...filesBelow(dir)].sort();

/** The error a failed task ended with. */
function taskError(id: string): string {
  const done = events.find((e) => e.type === 'task-done' && e.id === id && e.outcome === 'failed');
  return done !== undefined && 'error' in done ? String(done.error) : `(no failure recorded for ${id})`;
}

/** Images in containerd's k8s.io namespace: name → manifest digest. */
function images(): Map<string, string> {
  const out = node.mustExec('ctr', '-n', 'k8s.io', 'images', 'ls');
  return new Map(
    out
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((cols) => cols.length >= 3)
      .map((cols) => [cols[0]!, cols[2]!]),
  );
}

/** Stages an OCI image archive the test writes itself; returns its manifest digest. */
function stage(name: string, ref: string, content: string): string {
  mkdirSync(imagesDir, { recursive: true });
  return writeOciArchive(path.join(imagesDir, name), { ref, file: 'hello.txt', content });
}

async function plan(): Promise<Map<string, PlanEntry>> {
  events = [];
  const result = await planNodefile(engine());
  if (!result.ok) throw new Error(`plan failed: ${JSON.stringify(result.error, null, 2)}`);
  const entries = result.value.plan.entries();
  console.info(`[e2e] plan:\n  ${entries.filter((e) => e.action !== 'unchanged').map((e) => `${String(e.id)}: ${e.verb} (${e.reasons.join('; ')})`).join('\n  ') || '(nothing to do)'}`);
  return new Map(entries.map((e) => [String(e.id), e]));
}

/** The plan entries that would do something, as `id: verb`. */
const changes = (p: Map<string, PlanEntry>): string[] =>
  [...p.values()].filter((e) => e.action !== 'unchanged').map((e) => `${String(e.id)}: ${e.verb}`);

const ran = (s: ApplySummary): string[] => s.ran.map(String).sort();

interface Snapshot {
  readonly container: RuncState;
  readonly containerd: number;
  readonly kubelet: number;
  /** The services' InvocationIDs: new with each start. Across a boot (a new pid namespace) compare these, not
   * MainPIDs, which the same boot sequence hands out again. */
  readonly invocations: { readonly containerd: string; readonly kubelet: string };
}

/** runc's view of the container and the MainPIDs of the two services. */
function snapshot(): Snapshot {
  const container = node.state();
  if (container === undefined) throw new Error(`runc does not know container ${SLOT}`);
  const invocation = (unit: string): string => node.showValue(unit, 'InvocationID');
  return {
    container,
    containerd: node.mainPid('containerd'),
    kubelet: node.mainPid('kubelet'),
    invocations: { containerd: invocation('containerd'), kubelet: invocation('kubelet') },
  };
}

/** The node answers as a node should: systemd running, containerd serving, kubelet active. */
function expectHealthy(): void {
  const system = node.systemState();
  const failed = system === 'running' ? '' : node.exec('systemctl', '--failed', '--no-pager').stdout;
  expect(system, `systemctl is-system-running (failed units: ${failed})`).toBe('running');
  const ctr = node.exec('ctr', 'version');
  expect(ctr.code, `ctr version: ${ctr.stdout}${ctr.stderr}`).toBe(0);
  expect(ctr.stdout).toMatch(/Server:\s*\n\s*Version:/);
  expect(node.isActive('containerd')).toBe('active');
  expect(node.isActive('kubelet')).toBe('active');
}

/** systemctl verbs the engine ran inside the node, as `verb unit` in order (status queries left out). */
function systemctlStory(): string[] {
  return runner.commands.flatMap((c) => {
    const i = c.indexOf('systemctl');
    if (i < 0) return [];
    const verb = c[i + 1];
    if (verb === undefined || ['is-active', 'is-enabled', 'is-system-running', 'show'].includes(verb)) return [];
    return [[verb, ...c.slice(i + 2)].join(' ')];
  });
}

/** The container lifecycle commands the engine ran: runc run, runc kill (with the signal), runc delete. */
function runcStory(): string[] {
  return runner.commands.flatMap((c) => {
    const i = c.findIndex((w) => w === 'run' || w === 'kill' || w === 'delete');
    const isRunc = c.some((w) => w.endsWith('/runc') || w === 'runc');
    if (!isRunc || i < 0 || c.includes('exec')) return [];
    return [[c[i] === 'run' ? 'run' : c[i], ...c.slice(i + 1).filter((w) => w !== '--detach' && w !== '--bundle' && w !== slotDir)].join(' ')];
  });
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error('the e2e suite needs root (runc, mounts, device nodes): run it as root');
  if (sh(['runc', '--version']).code !== 0) throw new Error('runc is not installed (apt-get install runc; .ci/run does it)');
  for (const line of reapStaleWorkDirs(runcRootOf)) console.warn(`[e2e] reaped: ${line}`);

  const image = await ensureImage();
  timings.push(`build-image.sh: ${(image.ms / 1000).toFixed(1)} s`);

  work = makeWorkDir();
  root = path.join(work, 'root');
  stateDir = path.join(work, 'state');
  configFile = path.join(work, 'node.json');
  slotDir = path.join(root, 'var/lib/nodegraph/containers', SLOT);
  imagesDir = path.join(root, IMAGES);
  node = new Node(runcRootOf(work), SLOT);
  config = {
    nodeName: 'e2e-node',
    cluster: { server: 'https://10.0.0.1:6443', caData: CA, bootstrapToken: 'abcdef.0123456789abcdef' },
    clusterDNS: ['10.96.0.10'],
    registryMirrors: { 'docker.io': ['https://mirror-a.example.com'] },
    kubernetesVersion: 'v1.30.2',
    image: image.archive,
    slot: SLOT,
    root,
    runtime: { runc: must(['sh', '-c', 'command -v runc']).trim() },
    supervisor: 'runc',
    hostNetwork: false,
    gpu: 'off',
    imageArchiveDir: IMAGES,
    kernelModules: MODULES,
    timeouts: { systemd: 120, service: 60, stop: 60, interval: 0.2, healthy: 2 },
  };
  helloDigest = stage('hello.tar', 'nodegraph.test/hello:1', 'hello one\n');
  rootBefore = findBelow(root);
  writeConfig();
  process.env['NODEGRAPH_NODE_CONFIG'] = configFile;
});

afterAll(() => {
  if (work === '') return;
  // Whatever happened: no container, no mount, no folder left behind.
  const did = cleanWorkDir(work, runcRootOf(work), { keep: process.env['NODEGRAPH_E2E_KEEP'] === '1' });
  for (const line of did) console.warn(`[e2e] cleanup: ${line}`);
  console.info(`[e2e] timings:\n  ${timings.join('\n  ')}`);
});

describe('graphs/container-node.ts on real runc, systemd and containerd', () => {
  it('1. the first apply brings the node up: systemd running, containerd answering ctr version, kubelet active', async () => {
    expect(node.state(), 'no container before the first apply').toBeUndefined();
    const p = await plan();
    expect([...p.values()].every((e) => e.action === 'create'), changes(p).join('\n')).toBe(true);
    expect(p.get(`${SLOT}/rootfs`)?.verb).toBe('unpack');
    expect(p.get(`${SLOT}/container`)?.verb).toBe('start');
    expect(p.get(`${SLOT}/containerd`)?.verb).toBe('start');
    expect(p.get(`${SLOT}/kubelet`)?.verb).toBe('start');
    expect(p.get(`${SLOT}/image/hello.tar`)).toMatchObject({ verb: 'import', reasons: ['never ran'] });
    expect(p.get('host/kernel-modules')?.verb).toBe('load');

    const summary = await apply('first apply');
    expect(ran(summary)).toEqual([...p.keys()].sort());
    expect(runcStory()).toEqual([`run ${SLOT}`]);
    // The configuration went in before the container booted, so its services are enabled and started once, with no reload.
    expect(systemctlStory()).toEqual(['enable --now containerd', 'enable --now kubelet']);

    // The staged archive was imported into the CRI's namespace once containerd ran.
    const importAt = runner.commands.findIndex((c) => c.includes('import'));
    expect(runner.commands[importAt]).toEqual([config.runtime!.runc, '--root', node.runcRoot, 'exec', SLOT, 'ctr', '-n', 'k8s.io', 'images', 'import', `${IMAGES}/hello.tar`]);
    expect(importAt).toBeGreaterThan(runner.commands.findIndex((c) => c.includes('--now') && c.includes('containerd')));
    expect(images().get('nodegraph.test/hello:1')).toBe(helloDigest);

    // The host's modules-load list, and modprobe only for what the kernel has neither loaded nor built in.
    expect(readFileSync(path.join(root, 'etc/modules-load.d/nodegraph.conf'), 'utf8')).toBe(
      '# Written by nodegraph: kernel modules the Kubernetes node needs, loaded at boot.\noverlay\nbridge\n',
    );
    const procModules = existsSync('/proc/modules') ? readFileSync('/proc/modules', 'utf8') : '';
    const inKernel = (m: string): boolean => existsSync(`/sys/module/${m}`) || procModules.split('\n').some((l) => l.startsWith(`${m} `));
    expect(runner.matching('modprobe')).toEqual(MODULES.filter((m) => !inKernel(m)).map((m) => ['modprobe', m]));

    const s = snapshot();
    expect(s.container.status).toBe('running');
    expect(s.container.bundle).toBe(slotDir);
    expect(s.container.pid).toBeGreaterThan(0);
    expect(s.containerd).toBeGreaterThan(0);
    expect(s.kubelet).toBeGreaterThan(0);
    expect(node.mustExec('cat', '/proc/1/comm').trim()).toBe('systemd');
    expectHealthy();
    // The stand-in kubelet read the configuration nodegraph wrote on the host side of the shared /var/lib/kubelet.
    await eventually(() =>
      expect(node.journal(undefined, '-u', 'kubelet').map(messageOf).join('\n')).toContain('kubelet (stand-in): loaded /var/lib/kubelet/config.yaml'),
    );
    up = true;
  });

  it('9. the rendered files pass the real tools: runc boots the bundle, systemd-analyze verify, containerd config dump', () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    // runc accepted config.json: the node above booted from it. And it is the bundle runc ran.
    const spec = JSON.parse(readFileSync(path.join(slotDir, 'config.json'), 'utf8')) as { process: { args: string[] }; linux: { namespaces: { type: string }[] } };
    expect(spec.process.args).toEqual(['/sbin/init']);
    expect(spec.linux.namespaces.map((n) => n.type)).toContain('cgroup');
    expect(node.state()?.annotations['org.nodegraph.stop-signal']).toBe('SIGRTMIN+3');

    // kubelet.service with nodegraph's drop-in, verified by the node's own systemd (this host runs no systemd).
    const dropIns = node.showValue('kubelet', 'DropInPaths');
    expect(dropIns).toContain('/etc/systemd/system/kubelet.service.d/10-nodegraph.conf');
    const verify = node.exec('systemd-analyze', 'verify', 'kubelet.service');
    expect(verify.code, `systemd-analyze verify kubelet.service:\n${verify.stdout}${verify.stderr}`).toBe(0);
    expect(`${verify.stdout}${verify.stderr}`).not.toMatch(/10-nodegraph|kubelet\.service:/);
    expect(node.showValue('kubelet', 'ExecStart')).toContain('--hostname-override=e2e-node');

    // The unit a systemd host would supervise the container with (supervisor: systemd), rendered by the
    // graph's own function for this slot; this run uses `runc run --detach`, so it is verified here only.
    const unitText = containerUnit({
      id: SLOT,
      runc: { binary: '/usr/sbin/runc', stateRoot: node.runcRoot },
      bundle: slotDir,
      consoleLog: path.join(slotDir, 'console.log'),
      stopTimeoutSeconds: 60,
    });
    writeFileSync(path.join(slotDir, 'rootfs/var/tmp/nodegraph-kube1.service'), unitText);
    const unitVerify = node.exec('systemd-analyze', 'verify', '/var/tmp/nodegraph-kube1.service');
    expect(unitVerify.code, `systemd-analyze verify nodegraph-kube1.service:\n${unitVerify.stdout}${unitVerify.stderr}`).toBe(0);
    expect(`${unitVerify.stdout}${unitVerify.stderr}`).not.toMatch(/nodegraph-kube1\.service:/);

    // containerd parses the config.toml nodegraph rendered into the rootfs.
    const dump = node.exec('containerd', '--config', '/etc/containerd/config.toml', 'config', 'dump');
    expect(dump.code, `containerd config dump:\n${dump.stderr}`).toBe(0);
    expect(dump.stdout).toMatch(/config_path = "\/etc\/containerd\/certs\.d"/);
    expect(dump.stdout).toMatch(/SystemdCgroup = true/);
    expect(dump.stdout).toMatch(/sandbox_image = "registry\.k8s\.io\/pause:3\.9"/);
    // The registry mirror file the host wrote is what containerd sees through the shared certs.d.
    expect(node.mustExec('cat', '/etc/containerd/certs.d/docker.io/hosts.toml')).toContain('mirror-a.example.com');
  });

  it('22. the stand-in kubelet bootstraps as a real one: a client certificate under /var/lib/kubelet/pki when none is there, once', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    // The host side of the shared kubelet folder: what the stand-in wrote is there.
    const pki = path.join(root, 'var/lib/kubelet/pki');
    const clientFiles = (): string[] => readdirSync(pki).filter((f) => f.startsWith('kubelet-client-')).sort();
    const current = path.join(pki, 'kubelet-client-current.pem');
    const first = readlinkSync(current);
    expect(first).toMatch(/^\/var\/lib\/kubelet\/pki\/kubelet-client-\d{4}(-\d\d){5}\.pem$/);
    expect(clientFiles()).toEqual([path.basename(first), 'kubelet-client-current.pem'].sort());
    // One file holds the certificate and its key, as a real kubelet's does; the subject is the node's.
    const pem = path.join(root, first);
    expect(must(['openssl', 'x509', '-in', pem, '-noout', '-subject']).trim()).toBe('subject=O = system:nodes, CN = system:node:e2e-node');
    expect(sh(['openssl', 'pkey', '-in', pem, '-noout']).code).toBe(0);
    const kubeconfig = readFileSync(path.join(root, 'var/lib/kubelet/kubeconfig'), 'utf8');
    expect(kubeconfig).toContain('client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem');
    expect(kubeconfig).toContain('server: https://10.0.0.1:6443');
    const bootstrapped = (): string[] => node.journal(undefined, '-u', 'kubelet').map(messageOf).filter((m) => m.includes('bootstrapped'));
    expect(bootstrapped()).toEqual([`kubelet (stand-in): bootstrapped: wrote ${first} and /var/lib/kubelet/kubeconfig (CN=system:node:e2e-node)`]);

    // Started again, it finds its certificate and makes none.
    const content = readFileSync(pem, 'utf8');
    node.mustExec('systemctl', 'restart', 'kubelet');
    await eventually(() => expect(node.isActive('kubelet')).toBe('active'));
    expect(clientFiles()).toEqual([path.basename(first), 'kubelet-client-current.pem'].sort());
    expect(bootstrapped()).toHaveLength(1);

    // Its identity taken away (as a reset of the shared kubelet state does), it bootstraps a new one.
    for (const f of clientFiles()) rmSync(path.join(pki, f));
    rmSync(path.join(root, 'var/lib/kubelet/kubeconfig'));
    node.mustExec('systemctl', 'restart', 'kubelet');
    // The link names a node path: read it on the host side.
    const second = await eventually(() => readlinkSync(current));
    expect(readFileSync(path.join(root, second), 'utf8')).not.toBe(content);
    await eventually(() => expect(existsSync(path.join(root, 'var/lib/kubelet/kubeconfig'))).toBe(true));
    expect(node.isActive('kubelet')).toBe('active');
  });

  it('2. a second apply does nothing: no task runs, no pid changes', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const p = await plan();
    expect(changes(p)).toEqual([]);
    const before = snapshot();
    const started = performance.now();
    const summary = await apply('second apply (no change)');
    const took = performance.now() - started;
    // A no-op runs only the checks, in parallel: what they span is its critical path; the rest is the engine's.
    console.info(`[e2e] no-op apply ${took.toFixed(0)} ms: the checks' commands span ${runner.busy().toFixed(0)} ms (${runner.commands.length} commands), the rest ${(took - runner.busy()).toFixed(0)} ms`);
    expect(ran(summary)).toEqual([]);
    expect(summary.destroyed).toEqual([]);
    expect(systemctlStory()).toEqual([]);
    expect(runcStory()).toEqual([]);
    expect(snapshot()).toEqual(before);
  });

  it('23. a check that cannot reach containerd (its socket accepts, nothing answers) fails within a second or two', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    // A wedged containerd: the kernel still accepts connections on its socket, nobody answers them.
    // (A killed one's socket refuses them, and ctr fails at once either way.)
    node.mustExec('systemctl', 'kill', '--signal=SIGSTOP', 'containerd');
    try {
      runner.reset();
      const p = await plan();
      const ctr = runner.commands.findIndex((c) => c.includes('ctr') && c.includes('version'));
      expect(ctr, runner.lines().join('\n')).toBeGreaterThanOrEqual(0);
      const ctrMs = runner.spans[ctr]!.end - runner.spans[ctr]!.start;
      console.info(`[e2e] ctr version against a containerd that does not answer: ${ctrMs.toFixed(0)} ms (${runner.lines()[ctr]})`);
      expect(p.get(`${SLOT}/verified`)?.reasons.join(' ')).toMatch(/^check failed: ctr version failed in kube1: ctr: failed to dial/);
      expect(ctrMs).toBeLessThan(2_000);
    } finally {
      node.mustExec('systemctl', 'kill', '--signal=SIGCONT', 'containerd');
    }
    expect(changes(await plan())).toEqual([]);
  });

  it('3. editing only a registry mirror restarts containerd alone', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, registryMirrors: { 'docker.io': ['https://mirror-b.example.com'] } }));
    const p = await plan();
    expect(p.get(`${SLOT}/containerd.config`)).toMatchObject({ action: 'update', verb: 'update' });
    expect(p.get(`${SLOT}/containerd.config`)?.reasons.join(' ')).toMatch(/input registryMirrors changed/);
    expect(p.get(`${SLOT}/containerd`)).toMatchObject({ action: 'maybe', verb: 'may restart' });
    expect(p.get(`${SLOT}/containerd`)?.reasons).toEqual([`known after ${SLOT}/containerd.config`]);
    expect(p.get(`${SLOT}/kubelet`)?.action).toBe('unchanged');
    expect(p.get(`${SLOT}/container`)?.action).toBe('unchanged');

    const before = snapshot();
    const summary = await apply('registry mirror changed');
    // host/config reads the edited file; its output (node name, slot) is unchanged, so it stops there.
    expect(ran(summary)).toEqual(['host/config', `${SLOT}/containerd`, `${SLOT}/containerd.config`, `${SLOT}/verified`]);
    expect(systemctlStory()).toEqual(['restart containerd']);
    expect(runcStory()).toEqual([]);
    const after = snapshot();
    expect(after.containerd).not.toBe(before.containerd);
    expect(after.kubelet).toBe(before.kubelet);
    expect(after.container).toEqual(before.container);
    expectHealthy();
    expect(node.mustExec('cat', '/etc/containerd/certs.d/docker.io/hosts.toml')).toContain('mirror-b.example.com');
  });

  it('4. editing only the kubelet configuration (maxPods) restarts kubelet alone', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, kubelet: { extra: { maxPods: 50 } } }));
    const p = await plan();
    expect(p.get(`${SLOT}/kubelet.config`)).toMatchObject({ action: 'update' });
    expect(p.get(`${SLOT}/kubelet.config`)?.reasons.join(' ')).toMatch(/input settings changed/);
    expect(p.get(`${SLOT}/kubelet`)).toMatchObject({ action: 'maybe', verb: 'may restart', reasons: [`known after ${SLOT}/kubelet.config`] });
    expect(p.get(`${SLOT}/containerd`)?.action).toBe('unchanged');
    expect(p.get(`${SLOT}/container`)?.action).toBe('unchanged');

    const before = snapshot();
    const summary = await apply('kubelet maxPods changed');
    expect(ran(summary)).toEqual(['host/config', `${SLOT}/kubelet`, `${SLOT}/kubelet.config`, `${SLOT}/verified`]);
    // kubelet's task reloads systemd first (its drop-in may have changed), then restarts it.
    expect(systemctlStory()).toEqual(['daemon-reload', 'restart kubelet']);
    expect(runcStory()).toEqual([]);
    const after = snapshot();
    expect(after.kubelet).not.toBe(before.kubelet);
    expect(after.containerd).toBe(before.containerd);
    expect(after.container).toEqual(before.container);
    expectHealthy();
    expect(node.mustExec('cat', '/var/lib/kubelet/config.yaml')).toMatch(/^maxPods: 50$/m);
  });

  it('5. editing both restarts both, containerd first (journal order and unit timestamps)', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, clusterDNS: ['10.96.0.11'], registryMirrors: { 'docker.io': ['https://mirror-c.example.com'] } }));
    const p = await plan();
    expect(p.get(`${SLOT}/containerd.config`)?.action).toBe('update');
    expect(p.get(`${SLOT}/kubelet.config`)?.action).toBe('update');
    expect(p.get(`${SLOT}/containerd`)).toMatchObject({ action: 'maybe', verb: 'may restart', reasons: [`known after ${SLOT}/containerd.config`] });
    expect(p.get(`${SLOT}/kubelet`)).toMatchObject({ action: 'maybe', verb: 'may restart', reasons: [`known after ${SLOT}/kubelet.config`] });
    expect(p.get(`${SLOT}/container`)?.action).toBe('unchanged');

    const before = snapshot();
    const cursor = node.cursor();
    const summary = await apply('registry mirror and clusterDNS changed');
    expect(ran(summary)).toEqual(['host/config', `${SLOT}/containerd`, `${SLOT}/containerd.config`, `${SLOT}/kubelet`, `${SLOT}/kubelet.config`, `${SLOT}/verified`]);
    expect(systemctlStory()).toEqual(['restart containerd', 'daemon-reload', 'restart kubelet']);
    const after = snapshot();
    expect(after.containerd).not.toBe(before.containerd);
    expect(after.kubelet).not.toBe(before.kubelet);
    expect(after.container).toEqual(before.container);

    // What the node's systemd did, in its journal's order: containerd went down and up before kubelet did.
    expect(unitStory(node.journal(cursor), UNITS)).toEqual([
      'Stopping containerd.service',
      'Stopped containerd.service',
      'Starting containerd.service',
      'Started containerd.service',
      'Stopping kubelet.service',
      'Stopped kubelet.service',
      'Started kubelet.service',
    ]);
    const entered = (unit: string): number => Number(node.showValue(unit, 'ActiveEnterTimestampMonotonic'));
    expect(entered('containerd')).toBeLessThan(entered('kubelet'));
    expectHealthy();
    expect(node.mustExec('cat', '/var/lib/kubelet/config.yaml')).toContain('10.96.0.11');
  });

  it('6. changing the bundle (an annotation) restarts the container once and does not restart the services', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, bundle: { annotations: { 'org.example.e2e': 'changed' } } }));
    const p = await plan();
    expect(p.get(`${SLOT}/bundle`)).toMatchObject({ action: 'update' });
    expect(p.get(`${SLOT}/bundle`)?.reasons.join(' ')).toMatch(/input spec changed/);
    expect(p.get(`${SLOT}/container`)).toMatchObject({ action: 'maybe', verb: 'may restart', reasons: [`known after ${SLOT}/bundle`] });
    expect(p.get(`${SLOT}/containerd.config`)?.action).toBe('unchanged');
    expect(p.get(`${SLOT}/kubelet.config`)?.action).toBe('unchanged');
    // The services are started with the new container, not restarted on their own: the plan says so.
    expect(p.get(`${SLOT}/containerd`)).toMatchObject({ action: 'maybe', verb: 'may start', reasons: [`known after ${SLOT}/container`] });
    expect(p.get(`${SLOT}/kubelet`)).toMatchObject({ action: 'maybe', verb: 'may start', reasons: [`known after ${SLOT}/container`] });

    const before = snapshot();
    const summary = await apply('bundle annotation changed');
    expect(ran(summary)).toEqual(['host/config', `${SLOT}/bundle`, `${SLOT}/container`, `${SLOT}/containerd`, `${SLOT}/kubelet`, `${SLOT}/verified`]);
    // One stop (SIGRTMIN+3 as 37, which runc 1.1 needs) and one run; the services were started with it, never restarted.
    expect(runcStory()).toEqual([`kill ${SLOT} 37`, `delete --force ${SLOT}`, `run ${SLOT}`]);
    // systemd in the new container started the enabled services; nodegraph only waited for them.
    expect(systemctlStory()).toEqual([]);
    expect(runner.matching('systemctl', 'restart')).toEqual([]);
    const after = snapshot();
    expect(after.container.pid).not.toBe(before.container.pid);
    expect(after.container.created).not.toBe(before.container.created);
    expect(after.container.annotations['org.example.e2e']).toBe('changed');
    expect(after.invocations.containerd).not.toBe(before.invocations.containerd);
    expect(after.invocations.kubelet).not.toBe(before.invocations.kubelet);
    expectHealthy();
    // In the new boot's journal each service started once and was never stopped.
    expect(unitStory(node.journal(), UNITS)).toEqual([
      'Starting containerd.service',
      'Started containerd.service',
      'Started kubelet.service',
    ]);
    // containerd's image store is in the rootfs: the restart kept it, and nothing was imported.
    expect(runner.matching('images', 'import')).toEqual([]);
    expect(images().get('nodegraph.test/hello:1')).toBe(helloDigest);
  });

  it('7. a soft reboot (--replace the container): the container alone restarts, systemd starts the services, nothing else runs', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const p = await plan();
    expect(changes(p)).toEqual([]);
    const before = snapshot();
    const summary = await apply('soft reboot (--replace kube1/container)', { replace: [`${SLOT}/container`] });
    // verified follows the services' MainPIDs, which a new pid namespace may give them again: it may or may not run.
    expect(ran(summary).filter((id) => id !== `${SLOT}/verified`)).toEqual([`${SLOT}/container`, `${SLOT}/containerd`, `${SLOT}/kubelet`]);
    expect(runcStory()).toEqual([`kill ${SLOT} 37`, `delete --force ${SLOT}`, `run ${SLOT}`]);
    // Nothing started, restarted or enabled them: systemd did, at boot; nodegraph waited.
    expect(systemctlStory()).toEqual([]);
    expect(runner.matching('modprobe')).toEqual([]);
    expect(runner.matching('images', 'import')).toEqual([]);
    const after = snapshot();
    expect(after.container.pid).not.toBe(before.container.pid);
    expect(after.container.created).not.toBe(before.container.created);
    expect(after.invocations.containerd).not.toBe(before.invocations.containerd);
    expect(after.invocations.kubelet).not.toBe(before.invocations.kubelet);
    expectHealthy();
    expect(unitStory(node.journal(), UNITS)).toEqual(['Starting containerd.service', 'Started containerd.service', 'Started kubelet.service']);
    expect(changes(await plan())).toEqual([]);
  });

  it("24. a container that cannot start (a bundle hook fails) fails its task with runc's own reason; taken back, the node comes up", async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, bundle: { ...c.bundle, hooks: { prestart: [{ path: '/bin/false' }] } } }));
    const summary = await applyAllowingFailures('a bundle hook that fails');
    expect(summary.failed.map(String)).toEqual([`${SLOT}/container`]);
    console.info(`[e2e] ${SLOT}/container failed: ${taskError(`${SLOT}/container`)}`);
    const [said, kept] = taskError(`${SLOT}/container`).split('\n');
    expect(said).toBe(
      `runc could not start container ${SLOT}: runc run failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr:  (console log ${slotDir}/console.log)`,
    );
    // The console log, kept under the state folder where the error says.
    const logs = /^kube1's logs are kept in (.+)$/.exec(kept ?? '')?.[1] ?? '';
    expect(path.dirname(logs)).toBe(path.join(stateDir, 'logs'));
    expect(readFileSync(path.join(logs, 'console.log'), 'utf8')).toContain('error running hook #0');
    expect(node.state()).toBeUndefined();
    writeConfig((c) => ({ ...c, bundle: { annotations: c.bundle?.annotations ?? {} } }));
    await apply('the hook taken away');
    expect(runcStory()).toEqual([`run ${SLOT}`]);
    expectHealthy();
    expect(changes(await plan())).toEqual([]);
  });

  it("10. a setting of the unit around the container (the stop timeout) does not restart it: same init pid", async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, timeouts: { ...c.timeouts!, stop: 45 } }));
    const p = await plan();
    expect(changes(p)).toEqual(['host/config: update']);
    const before = snapshot();
    const summary = await apply('stop timeout changed');
    expect(ran(summary)).toEqual(['host/config']);
    expect(runcStory()).toEqual([]);
    expect(snapshot()).toEqual(before);
  });

  it('13. the supervising unit under a real systemd (the node\'s own; this host has none): a rewrite and daemon-reload keep the container\'s init pid, a restart changes it', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    // A small container inside the node: a shell that ends on the stop signal (SIGRTMIN+3, 37; as PID 1 it
    // would ignore it otherwise), with the node's /usr read-only; its bundle from `runc spec`.
    const inner = path.join(slotDir, 'rootfs/var/tmp/inner');
    mkdirSync(path.join(inner, 'rootfs'), { recursive: true });
    for (const d of ['usr', 'proc', 'dev', 'sys', 'tmp']) mkdirSync(path.join(inner, 'rootfs', d), { recursive: true });
    for (const l of ['bin', 'sbin', 'lib', 'lib64']) symlinkSync(`usr/${l}`, path.join(inner, 'rootfs', l));
    must(['runc', 'spec', '--bundle', inner]);
    const spec = JSON.parse(readFileSync(path.join(inner, 'config.json'), 'utf8')) as {
      process: { terminal: boolean; args: string[] };
      root: { readonly: boolean };
      mounts: object[];
    };
    spec.process.terminal = false;
    spec.process.args = ['sh', '-c', "trap 'exit 0' 37; while :; do sleep 0.2; done"];
    spec.root.readonly = true;
    spec.mounts.push({ destination: '/usr', type: 'bind', source: '/usr', options: ['rbind', 'ro'] });
    writeFileSync(path.join(inner, 'config.json'), JSON.stringify(spec));

    // The unit as the graph renders it for a slot (supervisor: systemd), and as its unit task installs it.
    const unitFile = path.join(slotDir, 'rootfs/etc/systemd/system/nodegraph-inner.service');
    const render = (stopTimeoutSeconds: number): void =>
      writeFileSync(
        unitFile,
        containerUnit({ id: 'inner', runc: { binary: '/usr/sbin/runc' }, bundle: '/var/tmp/inner', consoleLog: '/var/tmp/inner/console.log', stopTimeoutSeconds }),
      );
    // The unit is Type=simple: `systemctl start` returns before runc has made the container.
    const innerPid = (other?: number): Promise<number> =>
      eventually(() => {
        const state = JSON.parse(node.mustExec('runc', 'state', 'inner')) as { pid: number; status: string };
        expect(state.status).toBe('running');
        expect(state.pid).not.toBe(other);
        return state.pid;
      });
    render(60);
    node.mustExec('systemctl', 'daemon-reload');
    node.mustExec('systemctl', 'start', 'nodegraph-inner.service');
    try {
      const pid = await innerPid();
      expect(pid).toBeGreaterThan(0);
      // What `kube1/unit` does on a unit-only change (plan: reload): rewrite, daemon-reload. The container keeps running.
      render(45);
      expect(node.showValue('nodegraph-inner', 'NeedDaemonReload')).toBe('yes');
      node.mustExec('systemctl', 'daemon-reload');
      expect(node.showValue('nodegraph-inner', 'TimeoutStopUSec')).toBe('45s');
      expect(node.isActive('nodegraph-inner')).toBe('active');
      expect(await innerPid()).toBe(pid);
      // What the container task does when the container itself changed (plan: restart): a new init.
      node.mustExec('systemctl', 'restart', 'nodegraph-inner.service');
      expect(await innerPid(pid)).not.toBe(pid);
    } finally {
      node.exec('systemctl', 'stop', 'nodegraph-inner.service');
      rmSync(unitFile, { force: true });
      node.exec('systemctl', 'daemon-reload');
    }
    expect(node.exec('runc', 'list', '-q').stdout.trim()).toBe('');
  });

  it("11. staged archives: a changed one is imported again, a new one imported, a bad one fails with containerd's words, a removed one left or pruned", async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const hello2 = stage('hello.tar', 'nodegraph.test/hello:1', 'hello two\n');
    expect(hello2).not.toBe(helloDigest);
    let p = await plan();
    expect(changes(p)).toEqual([`${SLOT}/image/hello.tar: import`]);
    expect(p.get(`${SLOT}/image/hello.tar`)?.reasons.join(' ')).toMatch(/^input archive changed/);
    let summary = await apply('a staged archive changed');
    expect(ran(summary)).toEqual([`${SLOT}/image/hello.tar`]);
    expect(images().get('nodegraph.test/hello:1')).toBe(hello2);
    helloDigest = hello2;

    const worldDigest = stage('world.tar', 'nodegraph.test/world:1', 'world\n');
    writeFileSync(path.join(imagesDir, 'bad.tar'), 'this is not an image archive\n');
    p = await plan();
    expect(changes(p)).toEqual([`${SLOT}/image/bad.tar: import`, `${SLOT}/image/world.tar: import`]);
    summary = await applyAllowingFailures('a new archive and a bad one');
    expect(summary.failed.map(String)).toEqual([`${SLOT}/image/bad.tar`]);
    expect(taskError(`${SLOT}/image/bad.tar`)).toBe(`containerd could not import ${IMAGES}/bad.tar: ctr: unexpected EOF`);
    expect(images().get('nodegraph.test/world:1')).toBe(worldDigest);

    // Taken away: the bad one never imported, so it just goes; world's images stay, and the plan says so.
    rmSync(path.join(imagesDir, 'bad.tar'));
    rmSync(path.join(imagesDir, 'world.tar'));
    p = await plan();
    expect(changes(p)).toEqual([`${SLOT}/image/world.tar: leave in containerd`, `${SLOT}/image/bad.tar: destroy`]);
    summary = await apply('archives taken away');
    expect(runner.matching('images', 'rm')).toEqual([]);
    expect(images().get('nodegraph.test/world:1')).toBe(worldDigest);
    expect(changes(await plan())).toEqual([]);

    // Pruning asked for: its name, and the CRI's sha256: name of the same image, go.
    writeConfig((c) => ({ ...c, imageArchivePrune: true }));
    p = await plan();
    expect(changes(p)).toEqual(['host/config: update', `${SLOT}/image/world.tar: prune from containerd`]);
    await apply('prune taken-away archives');
    const left = images();
    expect([...left.keys()].filter((ref) => left.get(ref) === worldDigest)).toEqual([]);
    expect(left.get('nodegraph.test/hello:1')).toBe(hello2);
    expect(changes(await plan())).toEqual([]);
  });

  it('12. a kernel module the host cannot load fails the apply, naming it; the node is not touched', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    writeConfig((c) => ({ ...c, kernelModules: [...MODULES, 'nodegraph_e2e_no_such_module'] }));
    const before = snapshot();
    const summary = await applyAllowingFailures('a missing kernel module');
    expect(summary.failed.map(String)).toEqual(['host/kernel-modules']);
    console.info(`[e2e] host/kernel-modules failed: ${taskError('host/kernel-modules')}`);
    expect(taskError('host/kernel-modules')).toMatch(
      /^kernel module nodegraph_e2e_no_such_module is neither loaded nor built in \(\/proc\/modules, \/sys\/module\), and modprobe nodegraph_e2e_no_such_module failed: \S/,
    );
    expect(snapshot()).toEqual(before);
    writeConfig((c) => ({ ...c, kernelModules: MODULES }));
    await apply('kernel modules back');
    expect(changes(await plan())).toEqual([]);
  });

  it('14. switching to the other slot (blue/green): kube2 comes up on its own rootfs, whose empty image store imports the staged archive again; kube1 stops and is kept prepared on its rootfs', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const other = new Node(runcRootOf(work), 'kube2');
    const kube1Rootfs = statSync(path.join(slotDir, 'rootfs')).ino;
    const identity = (): string => readlinkSync(path.join(root, 'var/lib/kubelet/pki/kubelet-client-current.pem'));
    const kube1Identity = identity();
    writeConfig((c) => ({ ...c, slot: 'kube2', prepare: [SLOT] }));
    const p = await plan();
    // kube1 is not declared while the switch is under way; once kube2 is healthy, it is stopped in place.
    expect(p.get(`${SLOT}/container`)).toMatchObject({ action: 'destroy', verb: 'stop' });
    // Its image tasks' ledger goes (the images stay in its store): imported again if it is the target again.
    expect(p.get(`${SLOT}/image/hello.tar`)).toMatchObject({ action: 'destroy', verb: 'destroy' });
    expect([...p.values()].filter((e) => String(e.id).startsWith(`${SLOT}/`) && !String(e.id).startsWith(`${SLOT}/image/`) && e.verb !== 'stop')).toEqual([]);
    expect(p.get('kube2/image/hello.tar')).toMatchObject({ action: 'create', verb: 'import' });
    expect(p.get('kube2/takeover')).toMatchObject({ action: 'create', verb: `upgrade from ${SLOT}` });
    const summary = await apply('switch to the other slot');
    // Its running tasks are stopped and kept (retire: 'stop'); its image tasks' ledger is destroyed.
    expect(summary.stopped.map(String)).toEqual(expect.arrayContaining([`${SLOT}/container`, `${SLOT}/kubelet`]));
    expect(summary.destroyed.map(String)).toEqual(expect.arrayContaining([`${SLOT}/image/hello.tar`]));
    expect(existsSync(path.join(root, 'var/lib/nodegraph/containers', SLOT, 'config.json')), 'kube1 kept in place').toBe(true);
    expect(statSync(path.join(slotDir, 'rootfs')).ino, 'kube1 kept prepared on the same rootfs').toBe(kube1Rootfs);
    // The shared identity was reset, and kube2's kubelet bootstrapped its own.
    await eventually(() => expect(identity(), "kube2's kubelet bootstrapped a client certificate of its own").not.toBe(kube1Identity));
    expect(node.state(), 'kube1 is stopped').toBeUndefined();
    node = other;
    slotDir = path.join(root, 'var/lib/nodegraph/containers', 'kube2');
    expect(runcStory()).toEqual([`run kube2`]);
    expect(node.state()?.status).toBe('running');
    expectHealthy();
    expect(runner.matching('images', 'import')).toHaveLength(1);
    expect(images().get('nodegraph.test/hello:1')).toBe(helloDigest);
    expect(changes(await plan())).toEqual([]);
  });

  it('26. rollback after a good switch stops the newer slot in place and gives the older its own kubelet identity back; rolling forward again finds the newer slot in place, and a bundle change made with it reaches the older slot only once the newer is healthy', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const kube2 = node;
    const kube1 = new Node(runcRootOf(work), SLOT);
    const kube1Dir = path.join(root, 'var/lib/nodegraph/containers', SLOT);
    const kube2Dir = slotDir;
    const pki = path.join(root, 'var/lib/kubelet/pki');
    const identity = (): string => readlinkSync(path.join(pki, 'kubelet-client-current.pem'));
    const kube2Identity = identity();
    // What kube1's kubelet ran with, kept with kube1 when kube2 took over.
    const kube1Identity = readlinkSync(path.join(kube1Dir, 'identity/pki/kubelet-client-current.pem'));
    expect(kube1Identity).not.toBe(kube2Identity);
    const inodes = (dir: string) => ({ rootfs: statSync(path.join(dir, 'rootfs')).ino, bundle: statSync(path.join(dir, 'config.json')).ino });
    const kube2Place = inodes(kube2Dir);

    runner.reset();
    events = [];
    const rolled = await timed('rollback after a good switch', () => rollbackNodefile(engine()));
    if (!rolled.ok) throw new Error(`rollback failed: ${JSON.stringify(rolled.error, null, 2)}\n${failures()}`);
    expect(kube2.state(), 'kube2 is stopped').toBeUndefined();
    expect(kube1.state()?.status).toBe('running');
    node = kube1;
    slotDir = kube1Dir;
    expectHealthy();
    expect(inodes(kube2Dir), 'kube2 stopped in place: rootfs and bundle kept').toEqual(kube2Place);
    expect(identity(), "kube1's kubelet runs with its own identity again, not a new one").toBe(kube1Identity);
    expect(readdirSync(pki).filter((n) => /^kubelet-client-\d/.test(n)), 'no new bootstrap').toHaveLength(1);
    config = JSON.parse(readFileSync(configFile, 'utf8')) as NodeConfigInput;
    expect(config.slot).toBe(SLOT);
    expect(changes(await plan())).toEqual([]);

    // Forward again, with a bundle change: kube2 found in place; kube1's bundle untouched until kube2 is healthy.
    const kube1Bundle = (): { ino: number; text: string } => ({ ino: statSync(path.join(kube1Dir, 'config.json')).ino, text: readFileSync(path.join(kube1Dir, 'config.json'), 'utf8') });
    const kube1Before = kube1Bundle();
    writeConfig((c) => ({ ...c, slot: 'kube2', prepare: [SLOT], bundle: { ...c.bundle, annotations: { ...c.bundle?.annotations, 'org.example.e2e': 'forward' } } }));
    let atHealthy: { ino: number; text: string } | undefined;
    failedAt = (e) => {
      if (e.type === 'transaction' && e.message.startsWith('healthy')) atHealthy ??= kube1Bundle();
    };
    let forward: ApplySummary;
    try {
      forward = await apply('forward again after the rollback, with a bundle change');
    } finally {
      failedAt = undefined;
    }
    expect(atHealthy, "kube1's config.json untouched until kube2 was healthy").toEqual(kube1Before);
    expect(kube1Bundle(), 'and after it: kube1 is not declared while the switch is under way').toEqual(kube1Before);
    expect(ran(forward)).not.toContain('kube2/rootfs');
    expect(runner.matching('tar')).toEqual([]);
    expect(inodes(kube2Dir).rootfs, 'the same rootfs').toBe(kube2Place.rootfs);
    node = kube2;
    slotDir = kube2Dir;
    expectHealthy();
    expect(identity(), "kube2's own identity back").toBe(kube2Identity);
    expect(JSON.parse(readFileSync(path.join(kube2Dir, 'config.json'), 'utf8')).annotations['org.example.e2e']).toBe('forward');
    // The switch done, kube1 is prepared again: now, not running, it gets the change.
    expect(changes(await plan())).toEqual([`${SLOT}/bundle: update`]);
    await apply('the prepared slot catches up');
    expect(JSON.parse(readFileSync(path.join(kube1Dir, 'config.json'), 'utf8')).annotations['org.example.e2e']).toBe('forward');
    expect(changes(await plan())).toEqual([]);
  });

  it('15. an upgrade back to kube1 whose bundle hook fails is undone: kube2 runs again on its rootfs, the shared files byte for byte', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const kube2 = node;
    const kube2Rootfs = statSync(path.join(slotDir, 'rootfs')).ino;
    const sharedBefore = sharedFiles();
    const initBefore = kube2.state()?.pid;
    writeConfig((c) => ({ ...c, slot: SLOT, prepare: ['kube2'], bundle: { ...c.bundle, hooks: { prestart: [{ path: '/bin/false' }] } } }));
    runner.reset();
    events = [];
    // --no-atomic asked for: a slot switch is atomic all the same.
    const result = await timed('an upgrade whose bundle hook fails', () => applyNodefile({ ...engine(), atomic: false }));
    expect(result.ok).toBe(false);
    const failure = !result.ok ? result.error.at(-1) : undefined;
    console.info(`[e2e] failed upgrade: ${JSON.stringify(failure)}`);
    expect(failure).toMatchObject({ reason: 'atomic-apply-failed', cause: `${SLOT}/container failed`, rolledBack: true });
    expect(new Node(runcRootOf(work), SLOT).state(), 'kube1 is not left running').toBeUndefined();
    expect(kube2.state()?.status).toBe('running');
    expect(kube2.state()?.pid).not.toBe(initBefore);
    expect(statSync(path.join(slotDir, 'rootfs')).ino, 'kube2 on the same rootfs').toBe(kube2Rootfs);
    expectHealthy();
    expect(sharedFiles()).toEqual(sharedBefore);
    expect(JSON.parse(readFileSync(configFile, 'utf8')).slot, 'the configuration is given back').toBe('kube2');
    expect(changes(await plan())).toEqual([]);
  });

  it('16. kill -9 of nodegraph at five points of an upgrade, then apply: exactly one slot running, the generation current that describes it, the shared files as it expects', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const kube2 = node;
    const kube1 = new Node(runcRootOf(work), SLOT);
    const sharedBefore = sharedFiles();
    const configBefore = readFileSync(configFile, 'utf8');
    const cli = (args: string[], env: Record<string, string> = {}): ReturnType<typeof spawnSync> =>
      spawnSync(process.execPath, [CLI, ...args, '-f', NODEFILE, '--state-dir', stateDir], {
        env: { ...process.env, NODEGRAPH_NODE_CONFIG: configFile, NO_COLOR: '1', CI: '1', ...env },
        encoding: 'utf8',
        timeout: 600_000,
      });
    // The upgrade: back to kube1, whose bundle (an annotation) is rendered anew, so that building it is a step.
    const points = [`after:${SLOT}/bundle`, `after:${SLOT}/takeover`, `after:${SLOT}/kubelet.config`, `after:${SLOT}/container`, 'health'];
    for (const point of points) {
      writeConfig((c) => ({ ...c, slot: SLOT, prepare: ['kube2'], bundle: { ...c.bundle, hooks: undefined, annotations: { upgrade: point } } }));
      const killed = await timed(`upgrade killed at ${point}`, async () => cli(['apply'], { NODEGRAPH_FAILPOINT: point }));
      expect(killed.signal, `the apply was killed at ${point}: ${String(killed.stdout)}${String(killed.stderr)}`).toBe('SIGKILL');
      const recovered = await timed(`apply after the kill at ${point}`, async () => cli(['apply']));
      expect(recovered.status, `the apply after ${point}: ${String(recovered.stdout)}${String(recovered.stderr)}`).toBe(0);
      expect(String(recovered.stdout)).toContain('rolling it back first');
      const running = [kube1, kube2].filter((n) => n.state()?.status === 'running').map((n) => n.id);
      expect(running, `after the kill at ${point}`).toEqual(['kube2']);
      expect(readFileSync(configFile, 'utf8'), 'the configuration is the running generation\'s').toBe(configBefore);
      const current = readFileSync(path.join(stateDir, 'generations/current'), 'utf8').split(' ')[0];
      const manifest = readManifest(stateDir, Number(current));
      expect(manifest.files.find((f) => f.path === configFile)?.sha256).toBe(createHash('sha256').update(configBefore).digest('hex'));
      expect(sharedFiles()).toEqual(sharedBefore);
      expect(existsSync(path.join(stateDir, 'transaction.json'))).toBe(false);
    }
    // With --continue, the next apply finishes the upgrade instead: kube1 runs, kube2 is stopped and kept.
    writeConfig((c) => ({ ...c, slot: SLOT, prepare: ['kube2'], bundle: { ...c.bundle, annotations: { upgrade: 'continued' } } }));
    const killed = await timed('upgrade killed after the new container started', async () => cli(['apply'], { NODEGRAPH_FAILPOINT: `after:${SLOT}/container` }));
    expect(killed.signal).toBe('SIGKILL');
    const continued = await timed('apply --continue', async () => cli(['apply', '--continue']));
    expect(continued.status, `${String(continued.stdout)}${String(continued.stderr)}`).toBe(0);
    expect([kube1, kube2].filter((n) => n.state()?.status === 'running').map((n) => n.id)).toEqual([SLOT]);
    expect(JSON.parse(readFileSync(configFile, 'utf8')).slot).toBe(SLOT);
    node = kube1;
    slotDir = path.join(root, 'var/lib/nodegraph/containers', SLOT);
    expectHealthy();
    // The switch done, kube2 is a prepared slot again, and catches up with the bundle it was frozen from.
    const caughtUp = cli(['apply']);
    expect(caughtUp.status, `${String(caughtUp.stdout)}${String(caughtUp.stderr)}`).toBe(0);
    // Through the CLI, as it was applied: in this process vitest's transform gives function actions another source text.
    const after = cli(['plan', '--detailed-exitcode']);
    expect(after.status, String(after.stdout)).toBe(0);
  });

  it('27. nodegraph killed in the takeover, between the old slot stopping and the resets, then apply --continue: the resets happen once, and the new kubelet bootstraps a certificate of its own', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const running = node;
    const target = running.id === 'kube1' ? 'kube2' : 'kube1';
    const next = new Node(runcRootOf(work), target);
    const pki = path.join(root, 'var/lib/kubelet/pki');
    // kubelet-client-current.pem names the certificate as the container sees it: read it from the host's side.
    const certOf = (): string => {
      const file = path.join(pki, path.basename(readlinkSync(path.join(pki, 'kubelet-client-current.pem'))));
      const fingerprint = sh(['openssl', 'x509', '-noout', '-fingerprint', '-sha256', '-in', file]);
      if (fingerprint.code !== 0) throw new Error(`openssl x509 ${file}: ${fingerprint.stderr}`);
      return fingerprint.stdout.trim();
    };
    const before = certOf();
    const marker = path.join(root, 'var/lib/nodegraph/containers/switch.json');
    // The target's kept identity goes, so that a reset shows as a new certificate.
    rmSync(path.join(root, 'var/lib/nodegraph/containers', target, 'identity'), { recursive: true, force: true });
    config = JSON.parse(readFileSync(configFile, 'utf8')) as NodeConfigInput;
    writeConfig((c) => ({ ...c, slot: target, prepare: [running.id as 'kube1' | 'kube2'] }));
    const killed = await timed('upgrade killed in the takeover', async () => runCli(['apply'], undefined, { NODEGRAPH_FAILPOINT: `stopped:${target}` }));
    expect(killed.end, killed.output).toBe('SIGKILL');
    expect(running.state(), 'the old slot was stopped').toBeUndefined();
    expect(JSON.parse(readFileSync(marker, 'utf8'))).toEqual({ from: [running.id], to: target, reset: false });
    expect(certOf(), 'not reset yet').toBe(before);
    const continued = await timed('apply --continue after the kill in the takeover', async () => runCli(['apply', '--continue']));
    expect(continued.end, continued.output).toBe('exit 0');
    expect([running, next].filter((n) => n.state()?.status === 'running').map((n) => n.id)).toEqual([target]);
    node = next;
    slotDir = path.join(root, 'var/lib/nodegraph/containers', target);
    expect(continued.output, `the killed run:\n${killed.output}`).toMatch(
      new RegExp(`switch from ${running.id}: stopped nothing \\(stopped already\\); reset \\d+ kubelet credential files?; its kubelet bootstraps anew`),
    );
    await eventually(() => expectHealthy(), 30_000);
    await eventually(() => expect(certOf(), 'a certificate of its own').not.toBe(before), 30_000);
    expect(existsSync(marker)).toBe(false);
    const after = await runCli(['plan', '--detailed-exitcode']);
    expect(after.end, after.output).toBe('exit 0');
  });

  /** An upgrade to the other slot made to fail by `change`: undone, the running slot running again, the shared files and the configuration as they were. */
  async function failedUpgrade(what: string, change: (c: NodeConfigInput) => NodeConfigInput, cause: (target: string) => RegExp): Promise<void> {
    const running = node;
    const target = running.id === 'kube1' ? 'kube2' : 'kube1';
    const next = new Node(runcRootOf(work), target);
    const sharedBefore = sharedFiles();
    const configBefore = readFileSync(configFile, 'utf8');
    config = JSON.parse(configBefore) as NodeConfigInput;
    writeConfig((c) => change({ ...c, slot: target, prepare: [running.id as 'kube1' | 'kube2'] }));
    runner.reset();
    events = [];
    const result = await timed(what, () => applyNodefile(engine()));
    expect(result.ok).toBe(false);
    const failure = !result.ok ? result.error.at(-1) : undefined;
    console.info(`[e2e] ${what}: ${JSON.stringify(failure)}`);
    expect(failure).toMatchObject({ reason: 'atomic-apply-failed', rolledBack: true });
    expect(failure !== undefined && 'cause' in failure ? failure.cause : '').toMatch(cause(target));
    expect(next.state(), `${target} is not left running`).toBeUndefined();
    expect(running.state()?.status).toBe('running');
    expectHealthy();
    expect(sharedFiles()).toEqual(sharedBefore);
    expect(readFileSync(configFile, 'utf8')).toBe(configBefore);
    config = JSON.parse(configBefore) as NodeConfigInput;
  }

  it('17. an upgrade whose kubelet binary does not exist is undone: reported as soon as systemd restarts it, with its journal; its logs kept under the state folder', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const target = node.id === 'kube1' ? 'kube2' : 'kube1';
    let reportedAt = 0;
    failedAt = (e) => {
      if (e.type === 'task-done' && e.id === `${target}/kubelet` && e.outcome === 'failed') reportedAt = Date.now();
    };
    try {
      await failedUpgrade(
        'an upgrade to a kubelet binary that does not exist',
        // The service timeout as a node has it: the failure must not wait it out.
        (c) => ({ ...c, kubelet: { ...c.kubelet, binary: '/usr/local/bin/no-such-kubelet' }, timeouts: { ...c.timeouts!, service: 60 } }),
        (t) => new RegExp(`^${t}/kubelet failed$`),
      );
    } finally {
      failedAt = undefined;
    }
    const error = taskError(`${target}/kubelet`);
    console.info(`[e2e] ${target}/kubelet failed with:\n${error}`);
    // Restart=always: seen waiting to be restarted (or restarted), not taken as "activating" until the timeout.
    expect(error.split('\n')[0]).toMatch(new RegExp(`^gave up after \\d+\\.\\ds \\(\\d+ probes\\) waiting for kubelet in ${target}: kubelet is \\w+ \\([a-z-]+\\); last result exit-code, \\d+ restarts? by systemd$`));
    expect(error).toContain(`journalctl --unit kubelet (last 10 lines):`);
    expect(error).toContain('status=203/EXEC');
    const kept = /'s logs are kept in (.+)$/m.exec(error)?.[1] ?? '';
    expect(path.dirname(kept)).toBe(path.join(stateDir, 'logs'));
    // After the rollback, its logs are there to read.
    expect(readdirSync(kept).sort()).toEqual(expect.arrayContaining(['console.log', 'failed-units.txt', 'journal.txt', 'kubelet.service.txt']));
    const journal = readFileSync(path.join(kept, 'kubelet.service.txt'), 'utf8');
    expect(journal).toContain('status=203/EXEC');
    // Within 20 s of its first failed start, by the journal's clock (the host's).
    const firstFailure = journal.split('\n').find((l) => /kubelet\.service: (Main process exited|Failed at step EXEC)/.test(l)) ?? '';
    const failedStart = Date.parse(firstFailure.split(' ')[0] ?? '');
    expect(Number.isNaN(failedStart), firstFailure).toBe(false);
    console.info(`[e2e] ${target}/kubelet reported ${((reportedAt - failedStart) / 1000).toFixed(1)} s after its first failed start`);
    expect(reportedAt - failedStart, `reported ${reportedAt - failedStart} ms after ${firstFailure}`).toBeLessThan(20_000);
  });

  it('18. an upgrade whose kubelet starts and dies after 5 s is undone: the health window catches it', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const dying = path.join(work, 'dying-kubelet');
    writeFileSync(dying, '#!/bin/sh\n# Starts, and dies 5 s later.\nsleep 5\nexit 1\n', { mode: 0o755 });
    await failedUpgrade(
      'an upgrade whose kubelet dies after 5 s',
      (c) => ({
        ...c,
        binaries: { ...c.binaries, kubelet: { source: dying, version: 'dies-after-5s', format: 'binary' } },
        timeouts: { ...c.timeouts!, healthy: 10 },
      }),
      (target) => new RegExp(`^${target}/verified is not healthy: its check failed \\d+\\.\\d s into the 10s it must keep passing: kubelet in ${target} is (failed|inactive|activating)`),
    );
  });

  it('19. stop keeps the place: kubelet stopped then applied starts alone (containerd and the container untouched); the whole slot stopped then applied comes back on the same rootfs and bundle', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const slot = node.id;
    const init = node.state()?.pid;
    const containerd = node.mainPid('containerd');
    const teardown = async (what: string, mode: 'stop' | 'destroy', targets: string[]): Promise<void> => {
      const result = await timed(what, () => teardownNodefile({ ...engine(), mode, targets }));
      if (!result.ok) throw new Error(`${what} failed: ${JSON.stringify(result.error, null, 2)}`);
      expect(result.value.failed).toEqual([]);
    };
    await teardown(`stop ${slot}/kubelet`, 'stop', [`${slot}/kubelet`]);
    expect(node.isActive('kubelet')).not.toBe('active');
    let summary = await apply(`apply after stop ${slot}/kubelet`);
    expect(ran(summary).filter((id) => id !== `${slot}/verified`)).toEqual([`${slot}/kubelet`]);
    // kubelet's task reads its drop-in anew (daemon-reload) before it starts it: nothing else is touched.
    expect(systemctlStory()).toEqual(['daemon-reload', 'restart kubelet']);
    expect(node.isActive('kubelet')).toBe('active');
    expect(node.mainPid('containerd')).toBe(containerd);
    expect(node.state()?.pid).toBe(init);

    const rootfs = statSync(path.join(slotDir, 'rootfs')).ino;
    const bundle = statSync(path.join(slotDir, 'config.json')).ino;
    await teardown(`stop ${slot}/*`, 'stop', [`${slot}/*`]);
    expect(node.state()).toBeUndefined();
    summary = await apply(`apply after stop ${slot}/*`);
    expect(ran(summary)).not.toContain(`${slot}/rootfs`);
    expect(ran(summary)).not.toContain(`${slot}/bundle`);
    expect(runcStory()).toEqual([`run ${slot}`]);
    expect(statSync(path.join(slotDir, 'rootfs')).ino).toBe(rootfs);
    expect(statSync(path.join(slotDir, 'config.json')).ino).toBe(bundle);
    expectHealthy();
  });

  it('20. with one slot running and the other prepared: stopping and destroying the prepared one leave the running one untouched, and the shared data in place', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const running = node;
    const prepared = SLOT === running.id ? 'kube2' : SLOT;
    const init = running.state()?.pid;
    const pids = { containerd: running.mainPid('containerd'), kubelet: running.mainPid('kubelet') };
    const sharedBefore = sharedFiles();
    for (const mode of ['stop', 'destroy'] as const) {
      const result = await timed(`${mode} ${prepared}/*`, () => teardownNodefile({ ...engine(), mode, targets: [`${prepared}/*`] }));
      if (!result.ok) throw new Error(`${mode} failed: ${JSON.stringify(result.error, null, 2)}`);
      expect(result.value.failed).toEqual([]);
      if (mode === 'destroy') expect(result.value.order.map(String).every((id) => id.startsWith(`${prepared}/`))).toBe(true);
    }
    expect(existsSync(path.join(root, 'var/lib/nodegraph/containers', prepared))).toBe(false);
    expect(running.state()?.pid).toBe(init);
    expect({ containerd: running.mainPid('containerd'), kubelet: running.mainPid('kubelet') }).toEqual(pids);
    expect(sharedFiles()).toEqual(sharedBefore);
    expect(existsSync(path.join(root, 'var/lib/kubelet'))).toBe(true);
    expectHealthy();
  });

  it('21. GPU hosts, on a fake device tree below the root prefix (mknod): a slot made without grants is left alone; a slot built afresh gets the devices with their major, minor and mode, and follows a new device number', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const running = node.id;
    const fresh = running === 'kube1' ? 'kube2' : 'kube1';
    const dev = (name: string, major: number, minor: number): void => {
      mkdirSync(path.join(root, 'dev'), { recursive: true });
      rmSync(path.join(root, 'dev', name), { force: true });
      must(['mknod', '-m', '600', path.join(root, 'dev', name), 'c', String(major), String(minor)]);
    };
    const NODES = ['/dev/nvidia-uvm', '/dev/nvidia0', '/dev/nvidiactl'];
    const statInside = (): Sh => node.exec('stat', '-c', '%n %F %t %T %a', ...NODES);
    // The configuration as the node has it (a rolled-back change gave the file back).
    config = JSON.parse(readFileSync(configFile, 'utf8')) as NodeConfigInput;

    // GPU discovery on, no GPU yet, the other slot not kept: nothing restarts.
    writeConfig((c) => ({ ...c, gpu: 'auto', prepare: [] }));
    const init = node.state()?.pid;
    await apply('gpu: auto on a host without a GPU');
    expect(node.state()?.pid).toBe(init);
    expect(changes(await plan())).toEqual([]);

    // A GPU appears: the running slot was made without grants, so it is left alone, and the plan says why.
    dev('nvidia0', 195, 0);
    dev('nvidiactl', 195, 255);
    dev('nvidia-uvm', 235, 0);
    mkdirSync(path.join(root, 'usr/lib/x86_64-linux-gnu'), { recursive: true });
    writeFileSync(path.join(root, 'usr/lib/x86_64-linux-gnu/libcuda.so.1'), 'fake libcuda\n');
    const appeared = await plan();
    expect(appeared.get(`${running}/gpu`)?.action).toBe('drift');
    expect(appeared.get(`${running}/gpu`)?.reasons.join(' ')).toMatch(
      new RegExp(`an NVIDIA GPU is on the host \\(/dev/nvidia-uvm 235:0, /dev/nvidia0 195:0, /dev/nvidiactl 195:255\\), but ${running}'s rootfs was made without GPU grants: ${running} is left alone; adding a GPU needs a new rootfs`),
    );
    await apply('a GPU appears');
    expect(node.state()?.pid, 'the slot made without grants is left alone').toBe(init);
    expect(statInside().code).not.toBe(0);
    expect(changes(await plan())).toEqual([]);

    // A new rootfs: the other slot, kept in place since it last ran, destroyed and built afresh, gets the GPU.
    // (Prepared first: a destroy names tasks the graph declares.)
    writeConfig((c) => ({ ...c, prepare: [fresh] }));
    await apply(`${fresh} prepared again`);
    const destroyed = await timed(`destroy ${fresh}/*`, () => teardownNodefile({ ...engine(), mode: 'destroy', targets: [`${fresh}/*`] }));
    if (!destroyed.ok) throw new Error(`destroy ${fresh}/* failed: ${JSON.stringify(destroyed.error, null, 2)}`);
    expect(existsSync(path.join(root, 'var/lib/nodegraph/containers', fresh))).toBe(false);
    writeConfig((c) => ({ ...c, slot: fresh, prepare: [] }));
    await apply('switch to a slot built afresh on the GPU host');
    node = new Node(runcRootOf(work), fresh);
    slotDir = path.join(root, 'var/lib/nodegraph/containers', fresh);
    expectHealthy();
    expect(statInside().stdout.trim().split('\n')).toEqual([
      '/dev/nvidia-uvm character special file eb 0 666',
      '/dev/nvidia0 character special file c3 0 666',
      '/dev/nvidiactl character special file c3 ff 666',
    ]);
    expect(node.mustExec('cat', '/usr/lib/x86_64-linux-gnu/libcuda.so.1')).toBe('fake libcuda\n');
    const dump = node.exec('containerd', '--config', '/etc/containerd/config.toml', 'config', 'dump');
    expect(dump.code, `containerd config dump:\n${dump.stderr}`).toBe(0);
    expect(dump.stdout).toMatch(/BinaryName = "\/usr\/bin\/nvidia-container-runtime"/);

    // Each start: containerd and kubelet (started by systemd with the container) stopped, the NVIDIA state rebuilt, both started.
    const before = snapshot();
    const summary = await apply(`soft reboot of a GPU node (--replace ${fresh}/container)`, { replace: [`${fresh}/container`] });
    expect(ran(summary)).toEqual([`${fresh}/container`, `${fresh}/containerd`, `${fresh}/kubelet`, `${fresh}/nvidia`, `${fresh}/verified`]);
    expect(systemctlStory()).toEqual(['stop kubelet', 'stop containerd', 'start containerd', 'start kubelet']);
    const rebuilt = runner.commands.findIndex((c) => c.some((w) => w.includes('mknod')));
    expect(rebuilt).toBeGreaterThan(runner.commands.findIndex((c) => c.includes('stop') && c.includes('containerd')));
    expect(rebuilt).toBeLessThan(runner.commands.findIndex((c) => c.includes('start') && c.includes('containerd')));
    expect(snapshot().invocations.containerd).not.toBe(before.invocations.containerd);
    expectHealthy();
    expect(changes(await plan())).toEqual([]);

    // A reboot gave nvidia-uvm another major: the plan says so, the bundle follows, the container restarts once.
    dev('nvidia-uvm', 236, 0);
    const moved = await plan();
    expect(moved.get(`${fresh}/gpu`)).toMatchObject({ action: 'drift' });
    expect(moved.get(`${fresh}/gpu`)?.reasons.join(' ')).toContain('NVIDIA devices or driver libraries changed on the host: + /dev/nvidia-uvm 236:0, - /dev/nvidia-uvm 235:0');
    await apply('nvidia-uvm renumbered');
    expect(runcStory().filter((w) => w.startsWith('run'))).toEqual([`run ${fresh}`]);
    expect(statInside().stdout).toContain('/dev/nvidia-uvm character special file ec 0 666');
    expectHealthy();

    // GPU discovery off again: the grants go, the fake device tree is removed.
    writeConfig((c) => ({ ...c, gpu: 'off' }));
    await apply('gpu: off');
    expect(statInside().code).not.toBe(0);
    rmSync(path.join(root, 'dev'), { recursive: true });
    rmSync(path.join(root, 'usr/lib'), { recursive: true });
    expect(changes(await plan())).toEqual([]);
  });

  it('25. a kill -9 of nodegraph right after runc run: the next apply keeps the container it finds, which the current bundle describes', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const slot = node.id;
    // nodegraph itself, as a child process: the suite's engine loads the graph through vitest's transform, the
    // CLI through Node's type stripping, so their function definitions differ and the first CLI apply runs
    // every task once (a new rootfs too). After it, the CLI's runs differ only by what this step changes.
    const aligned = await runCli(['apply']);
    expect(aligned.end, aligned.output).toBe('exit 0');
    await eventually(() => expectHealthy(), 30_000);

    writeConfig((c) => ({ ...c, bundle: { ...c.bundle, annotations: { ...c.bundle?.annotations, 'org.example.e2e': 'killed' } } }));
    const before = node.state()!;
    let seen: RuncState | undefined;
    // The moment runc has made the new container, nodegraph dies.
    const killed = await runCli(['apply'], () => {
      const s = node.state();
      if (s?.status !== 'running' || s.created === before.created || s.annotations['org.example.e2e'] !== 'killed') return false;
      seen = s;
      return true;
    });
    expect(killed.end, killed.output).toBe('SIGKILL');
    expect(seen!.annotations['org.example.e2e']).toBe('killed');
    // systemd in it starts the services it finds enabled.
    await eventually(() => expectHealthy(), 30_000);
    const invocation = (unit: string): string => node.showValue(unit, 'InvocationID');
    const invocations = { containerd: invocation('containerd'), kubelet: invocation('kubelet') };

    // The node's applies are atomic: a plain apply would roll the cut-short change back; --continue finishes it.
    const after = await runCli(['apply', '--continue', '--json']);
    expect(after.end, after.output).toBe('exit 0');
    const logged = after.output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type: string; id?: string; message?: string })
      .filter((e) => e.type === 'task-log' && e.id === `${slot}/container`)
      .map((e) => e.message);
    expect(logged, after.output).toEqual([`${slot} already runs from this bundle (an apply cut short started it): not restarted`]);
    // The same container (pid, creation time) and the same service instances: nothing was stopped, run or restarted.
    expect(node.state()).toMatchObject({ status: 'running', pid: seen!.pid, created: seen!.created });
    expect({ containerd: invocation('containerd'), kubelet: invocation('kubelet') }).toEqual(invocations);
    expectHealthy();
    const again = await runCli(['plan', '--json']);
    const entries = (JSON.parse(again.output) as { entries: { id: string; action: string }[] }).entries;
    expect(entries.filter((e) => e.action !== 'unchanged')).toEqual([]);
  });

  it('28. the random-kill campaign: nodegraph killed at a random instant of whole slot switches, then apply or apply --continue in turn; after each recovery one slot runs, healthy, with its own identity, and nothing of the killed run is left', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const trials = Number(process.env['NODEGRAPH_E2E_TRIALS'] ?? '8');
    const seed = Number(process.env['NODEGRAPH_E2E_SEED'] ?? String(Date.now() % 100_000));
    let state = seed;
    // A small seeded generator (mulberry32): a failing trial can be run again with NODEGRAPH_E2E_SEED.
    const random = (): number => {
      state = (state + 0x6d2b79f5) | 0;
      let t = Math.imul(state ^ (state >>> 15), 1 | state);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    console.info(`[e2e] campaign: ${trials} trials, NODEGRAPH_E2E_SEED=${seed}`);
    const slots = (['kube1', 'kube2'] as const).map((id) => new Node(runcRootOf(work), id));
    const pki = path.join(root, 'var/lib/kubelet/pki');
    const identity = (): string => readlinkSync(path.join(pki, 'kubelet-client-current.pem'));
    // Each slot's kubelet identity as it last ran: a recovery gives the running slot its own back.
    const first = slots.find((n) => n.state()?.status === 'running');
    expect(first, 'a slot runs as the campaign begins').toBeDefined();
    const identities = new Map<string, string>([[first!.id, identity()]]);
    const sharedBut = (): Record<string, string> => {
      const { ['var/lib/kubelet/pki']: _identity, ...rest } = sharedFiles();
      return rest;
    };
    const sharedBefore = sharedBut();
    config = JSON.parse(readFileSync(configFile, 'utf8')) as NodeConfigInput;
    const lines: string[] = [];
    for (let trial = 1; trial <= trials; trial++) {
      const started = Date.now();
      const running = slots.find((n) => n.state()?.status === 'running')!;
      const target = running.id === 'kube1' ? 'kube2' : 'kube1';
      config = JSON.parse(readFileSync(configFile, 'utf8')) as NodeConfigInput;
      writeConfig((c) => ({ ...c, slot: target, prepare: [running.id as 'kube1' | 'kube2'] }));
      // Where: the moment a step of the switch shows in the live output, then a random delay into it.
      const marks = [
        `▶ ${target}/takeover`,
        `▶ ${target}/container`,
        `▶ ${target}/containerd`,
        `▶ ${target}/kubelet`,
        `▶ ${target}/verified`,
        'waiting for the graph to be healthy',
        'healthy: retiring',
      ];
      const mark = marks[Math.floor(random() * marks.length)]!;
      // The retirement takes well under a second: a delay into it, not past it.
      const delay = Math.floor(random() * (mark === 'healthy: retiring' ? 300 : 2000));
      const tag = `trial-${seed}-${trial}`;
      let seenAt = 0;
      const killed = await runCli(
        ['apply'],
        (output) => {
          // eslint-disable-next-line no-control-regex
          if (seenAt === 0 && output.replace(/\x1b\[[0-9;]*m/g, '').includes(mark)) seenAt = Date.now();
          return seenAt !== 0 && Date.now() - seenAt >= delay;
        },
        { NODEGRAPH_E2E_TRIAL: tag },
      );
      // In turn; an apply that finished before its kill leaves nothing to continue.
      const recovery = trial % 2 === 1 || killed.end !== 'SIGKILL' ? ['apply'] : ['apply', '--continue'];
      const recovered = await runCli(recovery, undefined, { NODEGRAPH_E2E_TRIAL: `${tag}-recovery` });
      const now = slots.filter((n) => n.state() !== undefined);
      const line = `trial ${trial}/${trials}: killed ${killed.end === 'SIGKILL' ? `at "${mark}" +${delay} ms` : `never (${killed.end}, "${mark}" +${delay} ms too late)`}; recovery ${recovery.join(' ')}: ${recovered.end}, ${now.map((n) => `${n.id} ${n.state()?.status}`).join(', ') || 'no container'}; ${((Date.now() - started) / 1000).toFixed(1)} s`;
      lines.push(line);
      console.info(`[e2e] ${line}`);
      expect(recovered.end, `${line}\n${recovered.output}`).toBe('exit 0');
      // Exactly one slot's container in runc, running; its services up.
      expect(now.map((n) => n.id), line).toHaveLength(1);
      node = now[0]!;
      slotDir = path.join(root, 'var/lib/nodegraph/containers', node.id);
      expect(node.state()?.status, line).toBe('running');
      await eventually(() => expectHealthy(), 30_000);
      // The shared files: the configuration's as before, and the running slot's own identity.
      expect(sharedBut(), line).toEqual(sharedBefore);
      const known = identities.get(node.id);
      if (known !== undefined) expect(identity(), `${line}: ${node.id}'s own identity`).toBe(known);
      else identities.set(node.id, await eventually(() => identity(), 30_000));
      // Nothing of the killed run is left: its process, or any process that inherited its environment.
      expect(existsSync(`/proc/${killed.pid}`), line).toBe(false);
      expect(processesInGroup(killed.pid), `${line}: its process group`).toEqual([]);
      expect(processesWithEnv('NODEGRAPH_E2E_TRIAL', tag), line).toEqual([]);
      for (const slot of slots) expect(existsSync(path.join(root, 'var/lib/nodegraph/containers', slot.id, 'rootfs.new')), line).toBe(false);
      expect(existsSync(path.join(stateDir, 'transaction')), `${line}: no transaction folder`).toBe(false);
      const planned = await runCli(['plan', '--detailed-exitcode']);
      expect(planned.end, `${line}\n${planned.output}`).toBe('exit 0');
    }
    console.info(`[e2e] campaign (NODEGRAPH_E2E_SEED=${seed}):\n  ${lines.join('\n  ')}`);
  });

  it('8. destroy leaves no container, no mount, no file of the node', async () => {
    expect(up, 'the node is not up (step 1 failed)').toBe(true);
    const slot = node.id;
    runner.reset();
    events = [];
    const result = await timed('destroy', () => teardownNodefile({ ...engine(), mode: 'destroy' }));
    if (!result.ok) throw new Error(`destroy failed: ${JSON.stringify(result.error, null, 2)}`);
    expect(result.value.failed, failures()).toEqual([]);
    expect(result.value.kept).toEqual([]);
    const order = result.value.order.map(String);
    expect(order.indexOf(`${slot}/kubelet`)).toBeLessThan(order.indexOf(`${slot}/containerd`));
    expect(order.indexOf(`${slot}/containerd`)).toBeLessThan(order.indexOf(`${slot}/container`));
    // The modules-load list goes once no slot is left; the modules stay loaded.
    expect(order.indexOf('host/kernel-modules')).toBeGreaterThan(order.indexOf(`${slot}/container`));
    expect(runner.matching('rmmod')).toEqual([]);

    // Below the root prefix, what was there before the first apply and nothing else: the operator's staged
    // archive and its folders stay; every folder nodegraph made (runc's state folder too) is gone. (Read before
    // the `runc list` below, which makes runc's state folder again.)
    expect(filesBelow(root)).toEqual([`${IMAGES.slice(1)}/hello.tar`]);
    expect(findBelow(root)).toEqual(rootBefore);
    expect(node.state()).toBeUndefined();
    for (const id of ['kube1', 'kube2']) {
      expect(node.runc('list', '-q').stdout.split('\n')).not.toContain(id);
      expect(sh(['runc', 'list', '-q']).stdout.split('\n')).not.toContain(id);
      expect(cgroupsNamed(id)).toEqual([]);
    }
    expect(mountsBelow(work)).toEqual([]);
    expect(processesRootedBelow(path.join(root, 'var/lib/nodegraph/containers'))).toEqual([]);
    for (const p of ['var/lib/nodegraph', 'var/lib/kubelet', 'opt/cni', 'etc/containerd', 'run/containerd', 'usr/local/libexec/nodegraph']) {
      expect(existsSync(path.join(root, p)), p).toBe(false);
    }
    // And nothing is found in place: status (the CLI's) has no trace, no orphan, every task absent.
    const status = await runCli(['status', '--json']);
    expect(status.end, status.output).toBe('exit 0');
    const { counts, tasks } = JSON.parse(status.output) as { counts: Record<string, number>; tasks: { id: string; status: string }[] };
    expect(tasks.filter((t) => t.status !== 'absent'), status.output).toEqual([]);
    expect(counts).toMatchObject({ trace: 0, orphan: 0, absent: tasks.length });
  });
});
