// Helpers for test/e2e/node.test.ts: the image archive, commands on this
// host, runc and systemd inside the node, what is mounted, cleanup, and a
// process runner that records what the engine ran while the real one runs it.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync, type Dirent } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from '../../src/nodefile/types.ts';
import { describeCommand, type ProcessRunner, type RunOptions, type RunResult } from '../../src/process-runner.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const BUILD_IMAGE = path.join(HERE, 'image/build-image.sh');

/** Where the suite's temporary folders go, and the prefix that marks them as ours (the fleet's have their own). */
const TMP = process.env['NODEGRAPH_E2E_TMP'] ?? tmpdir();
const PREFIX = 'nodegraph-e2e-node.';
export const FLEET_PREFIX = 'nodegraph-e2e-fleet.';
const OWNER = 'owner.pid';

export interface Sh {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a program on the host (no shell), bounded by a timeout; never throws for a non-zero exit. */
export function sh(argv: readonly string[], timeoutMs = 60_000): Sh {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  const code = r.status ?? (r.error !== undefined || r.signal !== null ? -1 : 0);
  return { code, stdout: r.stdout ?? '', stderr: `${r.stderr ?? ''}${r.error === undefined ? '' : String(r.error)}${r.signal === null ? '' : ` (killed by ${r.signal})`}` };
}

/** Same, and throws with the output unless it exited 0. */
export function must(argv: readonly string[], timeoutMs = 60_000): string {
  const r = sh(argv, timeoutMs);
  if (r.code !== 0) throw new Error(`${argv.join(' ')} exited ${r.code}:\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * Builds the node image archive, or finds it in the cache (build-image.sh
 * prints its path last). The build's progress goes to this process's stderr.
 */
export async function ensureImage(): Promise<{ archive: string; ms: number }> {
  const started = Date.now();
  // Asynchronous: a cold build takes minutes, and the test worker must stay responsive meanwhile.
  const child = spawn('bash', [BUILD_IMAGE], { stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const code = await new Promise<number | string>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status, signal) => resolve(status ?? signal ?? 'unknown'));
  });
  if (code !== 0) throw new Error(`build-image.sh failed (exit ${code}); its log is above`);
  const archive = stdout.trim().split('\n').at(-1) ?? '';
  if (!path.isAbsolute(archive) || !existsSync(archive)) throw new Error(`build-image.sh printed no archive path: ${stdout}`);
  return { archive, ms: Date.now() - started };
}

// ---- runc and systemd in the node ------------------------------------------

export interface RuncState {
  readonly status: string;
  readonly pid: number;
  readonly created: string;
  readonly bundle: string;
  readonly annotations: Record<string, string>;
}

export class Node {
  readonly runcRoot: string;
  readonly id: string;

  constructor(runcRoot: string, id: string) {
    this.runcRoot = runcRoot;
    this.id = id;
  }

  runc(...args: string[]): Sh {
    return sh(['runc', '--root', this.runcRoot, ...args]);
  }

  /** `runc state`, or undefined when runc does not know the container (or has no state folder). */
  state(): RuncState | undefined {
    // runc makes its state folder when asked for a state: the suite's probes must not make it either.
    if (!existsSync(this.runcRoot)) return undefined;
    const r = this.runc('state', this.id);
    if (r.code !== 0) return undefined;
    const s = JSON.parse(r.stdout) as Partial<RuncState>;
    return { status: s.status ?? '', pid: s.pid ?? 0, created: s.created ?? '', bundle: s.bundle ?? '', annotations: s.annotations ?? {} };
  }

  /** A command inside the node (`runc exec`); its stdout/stderr are pipes, which is fine for exec (not for `run -d`). */
  exec(...argv: string[]): Sh {
    return this.runc('exec', this.id, ...argv);
  }

  mustExec(...argv: string[]): string {
    const r = this.exec(...argv);
    if (r.code !== 0) throw new Error(`runc exec ${this.id} ${argv.join(' ')} exited ${r.code}:\n${r.stdout}${r.stderr}`);
    return r.stdout;
  }

  mainPid(unit: string): number {
    return Number.parseInt(this.mustExec('systemctl', 'show', '-p', 'MainPID', '--value', unit).trim(), 10);
  }

  showValue(unit: string, property: string): string {
    return this.mustExec('systemctl', 'show', '-p', property, '--value', unit).trim();
  }

  isActive(unit: string): string {
    return this.exec('systemctl', 'is-active', unit).stdout.trim();
  }

  systemState(): string {
    return this.exec('systemctl', 'is-system-running').stdout.trim();
  }

  /** The journal's current cursor: entries after it are what happened next. */
  cursor(): string {
    const out = this.mustExec('journalctl', '--show-cursor', '-n', '0', '--no-pager');
    const m = /^-- cursor: (.+)$/m.exec(out);
    if (m === null) throw new Error(`no journal cursor in: ${out}`);
    return m[1]!;
  }

  /** Journal entries (JSON), after a cursor or from the start of this boot, oldest first. */
  journal(after?: string, ...match: string[]): JournalEntry[] {
    const out = this.mustExec('journalctl', '--output=json', '--no-pager', ...(after === undefined ? ['--boot'] : [`--after-cursor=${after}`]), ...match);
    return out
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as JournalEntry);
  }
}

export interface JournalEntry {
  readonly MESSAGE?: string | number[];
  readonly UNIT?: string;
  readonly _PID?: string;
  readonly __MONOTONIC_TIMESTAMP: string;
  readonly __REALTIME_TIMESTAMP: string;
  readonly [field: string]: unknown;
}

export const messageOf = (e: JournalEntry): string =>
  typeof e.MESSAGE === 'string' ? e.MESSAGE : Array.isArray(e.MESSAGE) ? Buffer.from(e.MESSAGE).toString('utf8') : '';

/** What systemd (PID 1) said about units in these entries: "Started containerd.service", "Stopping kubelet.service", … */
export function unitStory(entries: readonly JournalEntry[], units: readonly string[]): string[] {
  const out: string[] = [];
  for (const e of entries) {
    if (e._PID !== '1' || e.UNIT === undefined || !units.includes(e.UNIT)) continue;
    const m = /^(Started|Stopping|Stopped|Starting|Reloading|Reloaded) /.exec(messageOf(e));
    if (m !== null) out.push(`${m[1]} ${e.UNIT}`);
  }
  return out;
}

// ---- the host: mounts, cgroups, processes ------------------------------------

const unescapeMount = (p: string): string => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));

/** Mount points at or below dir in this process's mount table, deepest first. */
export function mountsBelow(dir: string): string[] {
  const found: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const point = line.split(' ')[4];
    if (point === undefined) continue;
    const p = unescapeMount(point);
    if (p === dir || p.startsWith(`${dir}/`)) found.push(p);
  }
  return found.sort((a, b) => b.length - a.length);
}

/** cgroup directories named like the container (runc makes `<its cgroup>/<id>` in each hierarchy). */
export function cgroupsNamed(id: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    if (depth > 6) return;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const p = path.join(dir, e.name);
      if (e.name === id) found.push(p);
      else walk(p, depth + 1);
    }
  };
  walk('/sys/fs/cgroup', 0);
  return found;
}

/** Host pids whose root directory is at or below dir (processes of a node whose rootfs is there). */
export function processesRootedBelow(dir: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const root = readlinkSync(`/proc/${name}/root`);
      if (root === dir || root.startsWith(`${dir}/`)) pids.push(Number(name));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

/** Files (anything but a directory) left at or below dir, as paths relative to it. */
/** Processes whose environment holds `name=value` (what a run's children inherit), as pids. */
export function processesWithEnv(name: string, value: string): number[] {
  const wanted = `${name}=${value}`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(wanted)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** Processes in process group `pgid`, as pids (from /proc/<pid>/stat: the field after ppid). */
export function processesInGroup(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

export function filesBelow(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out.sort();
}

/** Directories at or below dir, as paths relative to it. */
export function dirsBelow(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const p = path.join(d, e.name);
      out.push(path.relative(dir, p));
      walk(p);
    }
  };
  if (existsSync(dir)) walk(dir);
  return out.sort();
}

/** Polls f until it returns without throwing, for up to timeoutMs; then throws its last error. */
export async function eventually<T>(f: () => T, timeoutMs = 10_000, intervalMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return f();
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}

// ---- the suite's work folder, and cleaning up after it (and after runs that died) --

/** A new work folder, marked with this process's pid so a later run can tell whether its owner is alive. */
export function makeWorkDir(prefix = PREFIX): string {
  mkdirSync(TMP, { recursive: true });
  const dir = mkdtempSync(path.join(TMP, prefix));
  writeFileSync(path.join(dir, OWNER), `${process.pid}\n`);
  return dir;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Removes everything a work folder holds: every container in its runc state
 * directories (SIGKILL, `delete --force`), every mount below it (deepest first,
 * lazily if busy), then the folder. Returns what it had to do.
 */
export function cleanWorkDir(dir: string, runcRoots: string | readonly string[], options: { readonly keep?: boolean } = {}): string[] {
  const did: string[] = [];
  for (const runcRoot of typeof runcRoots === 'string' ? [runcRoots] : runcRoots) {
    if (!existsSync(runcRoot)) continue;
    const list = sh(['runc', '--root', runcRoot, 'list', '-q']);
    for (const id of list.stdout.split('\n').filter((l) => l !== '')) {
      sh(['runc', '--root', runcRoot, 'kill', '--all', id, '9']);
      const del = sh(['runc', '--root', runcRoot, 'delete', '--force', id]);
      did.push(`deleted container ${id} (${del.code === 0 ? 'ok' : del.stderr.trim()})`);
    }
  }
  for (const m of mountsBelow(dir)) {
    const r = sh(['umount', m]);
    if (r.code !== 0) sh(['umount', '-l', m]);
    did.push(`unmounted ${m}`);
  }
  if (options.keep === true) did.push(`kept ${dir} (NODEGRAPH_E2E_KEEP=1)`);
  else if (mountsBelow(dir).length === 0) rmSync(dir, { recursive: true, force: true });
  else did.push(`kept ${dir}: still mounted below it`);
  return did;
}

/** Work folders of earlier runs whose process is gone (killed before its afterAll ran): cleaned up. */
export function reapStaleWorkDirs(runcRootOf: (dir: string) => string | readonly string[], prefix = PREFIX): string[] {
  const did: string[] = [];
  let names: string[];
  try {
    names = readdirSync(TMP).filter((n) => n.startsWith(prefix));
  } catch {
    return did;
  }
  for (const name of names) {
    const dir = path.join(TMP, name);
    let owner = 0;
    try {
      owner = Number.parseInt(readFileSync(path.join(dir, OWNER), 'utf8'), 10);
    } catch {
      // no owner file: half made; treat as stale
    }
    if (owner > 0 && alive(owner)) continue;
    did.push(`stale ${dir}:`, ...cleanWorkDir(dir, runcRootOf(dir)));
  }
  return did;
}

// ---- recording what the engine runs -------------------------------------------

/** Delegates to a real runner and keeps every command it ran, in order. */
export class RecordingRunner implements ProcessRunner {
  readonly inner: ProcessRunner;
  commands: string[][] = [];
  /** When each command ran, in ms (performance.now()), in the order of `commands`. */
  spans: { start: number; end: number }[] = [];

  constructor(inner: ProcessRunner) {
    this.inner = inner;
  }

  async run(command: Command, options: RunOptions): Promise<RunResult> {
    this.commands.push('shell' in command ? ['sh', '-c', command.shell] : [...command]);
    const span = { start: performance.now(), end: Number.NaN };
    this.spans.push(span);
    try {
      return await this.inner.run(command, options);
    } finally {
      span.end = performance.now();
    }
  }

  reset(): void {
    this.commands = [];
    this.spans = [];
  }

  /** From the first command's start to the last one's end, in ms (0 with none). */
  busy(): number {
    if (this.spans.length === 0) return 0;
    return Math.max(...this.spans.map((s) => s.end)) - Math.min(...this.spans.map((s) => s.start));
  }

  /** The recorded commands as lines, for messages. */
  lines(): string[] {
    return this.commands.map((c) => describeCommand(c));
  }

  /** Commands containing this sequence of words (e.g. `systemctl restart`). */
  matching(...words: string[]): string[][] {
    return this.commands.filter((c) => c.some((_, i) => words.every((w, j) => c[i + j] === w)));
  }
}
