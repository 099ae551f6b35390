// A fake process runner for the node graph: it records every command and
// answers like runc, systemctl (on the host and inside a container), ctr
// (version, images import/ls/rm), modprobe and the node's lifecycle helper
// would, from a small model of the world: an enabled unit is a wants file in
// the container's rootfs, so systemd "starts" it when the container boots.
// Commands it does not model (tar, sh scripts the tests want to really run)
// can be passed through to the real runner; the helper's folder commands
// always run for real, below the sandbox.

import { appendFileSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from '../../src/nodefile/types.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import { describeCommand, type ProcessRunner, type RunOptions, type RunResult } from '../../src/process-runner.ts';
import { FORGET_FOLDERS_SCRIPT } from '../../src/node/folders.ts';

export interface FakeService {
  active: boolean;
  pid: number;
  /** Its process could not run (a unit in `failingUnits`): systemd says `failed`. */
  failed?: boolean;
}

export interface FakeContainer {
  status: 'running' | 'stopped';
  pid: number;
  created: string;
  bundle: string;
  services: Map<string, FakeService>;
  systemState: string;
}

/** What happened, in words tests can assert on (in order). */
export type FakeEvent =
  | { readonly kind: 'container-start'; readonly id: string }
  | { readonly kind: 'container-stop'; readonly id: string }
  | { readonly kind: 'container-delete'; readonly id: string }
  | { readonly kind: 'service-start'; readonly id: string; readonly unit: string; readonly already: boolean }
  /** systemd in a booting container started an enabled unit by itself. */
  | { readonly kind: 'service-boot'; readonly id: string; readonly unit: string }
  | { readonly kind: 'service-enable'; readonly id: string; readonly unit: string }
  | { readonly kind: 'image-import'; readonly id: string; readonly archive: string }
  | { readonly kind: 'image-remove'; readonly id: string; readonly refs: readonly string[] }
  | { readonly kind: 'modprobe'; readonly module: string }
  | { readonly kind: 'service-restart'; readonly id: string; readonly unit: string }
  | { readonly kind: 'service-stop'; readonly id: string; readonly unit: string }
  | { readonly kind: 'daemon-reload'; readonly id: string }
  | { readonly kind: 'host-unit'; readonly verb: string; readonly unit: string }
  | { readonly kind: 'remove'; readonly path: string }
  | { readonly kind: 'unmount-below'; readonly path: string };

export interface FakeCall {
  readonly argv: readonly string[];
  readonly cwd: string;
}

export interface FakeRunnerOptions {
  /** Run these for real (e.g. tar): true to pass through. */
  readonly passthrough?: (argv: readonly string[]) => boolean;
  /** The helper may only remove paths below this folder. */
  readonly sandbox: string;
  /** A test's own answer for a command; undefined to fall back to the model. */
  readonly answer?: (argv: readonly string[]) => Partial<RunResult> | undefined;
  /** Kernel modules modprobe cannot find. */
  readonly missingModules?: readonly string[];
  /** Kernel modules built into the kernel. */
  readonly builtinModules?: readonly string[];
  /** Units whose process fails as it starts, with systemd's word for how (`203/EXEC`: the binary is missing). */
  readonly failingUnits?: Readonly<Record<string, string>>;
  /** runc's state folder: each container known has `<id>/state.json` there, as runc keeps it. */
  readonly runcRoot?: string;
}

/** The containers, mirrored into runc's state folder as they come and go (a graph reads it as it loads). */
class Containers extends Map<string, FakeContainer> {
  readonly #root: string | undefined;
  constructor(root: string | undefined) {
    super();
    this.#root = root;
  }
  override set(id: string, c: FakeContainer): this {
    super.set(id, c);
    if (this.#root !== undefined) {
      mkdirSync(path.join(this.#root, id), { recursive: true });
      writeFileSync(path.join(this.#root, id, 'state.json'), `${JSON.stringify({ id, created: c.created })}\n`);
    }
    return this;
  }
  override delete(id: string): boolean {
    if (this.#root !== undefined) rmSync(path.join(this.#root, id), { recursive: true, force: true });
    return super.delete(id);
  }
}

const okResult = (command: string, stdout = ''): RunResult => ({
  command,
  exitCode: 0,
  stdout,
  stderr: '',
  output: stdout,
  ok: true,
  canceled: false,
  failure: undefined,
});

const failResult = (command: string, code: number, stderr: string, stdout = ''): RunResult => ({
  command,
  exitCode: code,
  stdout,
  stderr,
  output: stdout + stderr,
  ok: false,
  canceled: false,
  failure: `exited with code ${code}`,
});

export class FakeRunner implements ProcessRunner {
  readonly calls: FakeCall[] = [];
  readonly events: FakeEvent[] = [];
  readonly containers: Map<string, FakeContainer>;
  readonly hostUnits = new Map<string, { enabled: boolean }>();
  /** Kernel modules modprobe loaded. */
  readonly loadedModules = new Set<string>();
  /** containerd's image store per container, ref → manifest digest: it lives in the rootfs, so a restart keeps it. */
  readonly images = new Map<string, Map<string, string>>();
  /** Units enabled in a container whose bundle is not known (the systemd supervisor); otherwise a file in its rootfs says so. */
  readonly #enabled = new Map<string, Set<string>>();
  readonly #real = new LocalRunner();
  readonly #options: FakeRunnerOptions;
  #nextPid = 1000;
  #clock = 0;

  constructor(options: FakeRunnerOptions) {
    this.#options = options;
    this.containers = new Containers(options.runcRoot);
  }

  /** Forgets what was recorded (the world stays). */
  reset(): void {
    this.calls.length = 0;
    this.events.length = 0;
  }

  /** Commands as strings, for readable assertions. */
  commands(): string[] {
    return this.calls.map((c) => c.argv.join(' '));
  }

  async run(command: Command, options: RunOptions): Promise<RunResult> {
    const argv = 'shell' in command ? ['/bin/sh', '-c', command.shell] : [...command];
    this.calls.push({ argv, cwd: options.cwd });
    const text = describeCommand(command);
    // runDetached wraps runc in `sh -c 'log=$1; shift; exec "$@" …' sh LOG RUNC …`: what runc prints goes to LOG.
    if (argv[0] === 'sh' && argv[1] === '-c' && argv[2]?.startsWith('log=$1; shift; exec "$@"')) {
      const inner = argv.slice(5);
      const scripted = this.#options.answer?.(inner);
      const result = scripted === undefined ? this.#model(inner, text) : { ...okResult(text), ...scripted };
      appendFileSync(argv[4]!, result.stdout + result.stderr);
      return { ...result, stdout: '', stderr: '', output: '' };
    }
    const scripted = this.#options.answer?.(argv);
    if (scripted !== undefined) return { ...okResult(text), ...scripted };
    if (this.#options.passthrough?.(argv)) return this.#real.run(command, options);
    if (path.basename(argv[0] ?? '') === 'node-helper' && FOLDER_VERBS.has(argv[1] ?? '')) return this.#folders(command, argv, options, text);
    if (argv[0] === '/bin/sh' && argv[2] === FORGET_FOLDERS_SCRIPT) return this.#folders(command, argv, options, text);
    return this.#model(argv, text);
  }

  /** The helper's folder commands and host/folders' destroy run for real, within the sandbox. */
  async #folders(command: Command, argv: readonly string[], options: RunOptions, text: string): Promise<RunResult> {
    const sandbox = path.resolve(this.#options.sandbox);
    const outside = argv.slice(argv[0] === '/bin/sh' ? 4 : 2).filter((a) => a.startsWith('/') && !path.resolve(a).startsWith(`${sandbox}/`));
    if (outside.length > 0) return failResult(text, 1, `fake helper: ${outside.join(', ')} is outside the sandbox\n`);
    const result = await this.#real.run(command, options);
    if (argv[1] === 'remove' || argv[1] === 'remove-unless-mounted') this.events.push({ kind: 'remove', path: path.resolve(argv.at(-1)!) });
    return result;
  }

  #model(argv: readonly string[], text: string): RunResult {
    const program = path.basename(argv[0] ?? '');
    if (program === 'runc') return this.#runc(stripGlobals(argv.slice(1)), text);
    if (program === 'systemctl') return this.#hostSystemctl(argv.slice(1), text);
    if (program === 'node-helper') return this.#helper(argv.slice(1), text);
    if (program === 'modprobe') {
      const module = argv[1] ?? '';
      this.events.push({ kind: 'modprobe', module });
      if (this.#options.missingModules?.includes(module)) {
        return failResult(text, 1, `modprobe: FATAL: Module ${module} not found in directory /lib/modules/6.1.0-fake\n`);
      }
      this.loadedModules.add(module);
      return okResult(text);
    }
    return failResult(text, 127, `fake runner: no model for ${text}\n`);
  }

  #runc(args: readonly string[], text: string): RunResult {
    const [verb, ...rest] = args;
    switch (verb) {
      case '--version':
        return okResult(text, 'runc version 1.1.5 (fake)\nspec: 1.0.2-dev\n');
      case 'state': {
        const id = rest[0]!;
        const c = this.containers.get(id);
        if (c === undefined) return failResult(text, 1, `container does not exist\n`);
        return okResult(text, JSON.stringify({ ociVersion: '1.0.2-dev', id, pid: c.status === 'running' ? c.pid : 0, status: c.status, bundle: c.bundle, created: c.created }, null, 2));
      }
      case 'run': {
        const id = rest.at(-1)!;
        const bundle = rest[rest.indexOf('--bundle') + 1] ?? '';
        return this.#start(id, bundle, text);
      }
      case 'kill': {
        const id = rest.find((a) => !a.startsWith('-'))!;
        const c = this.containers.get(id);
        if (c === undefined) return failResult(text, 1, 'container does not exist\n');
        if (c.status === 'running') this.#stop(id, c);
        return okResult(text);
      }
      case 'delete': {
        const id = rest.find((a) => !a.startsWith('-'))!;
        const c = this.containers.get(id);
        if (c === undefined) return failResult(text, 1, 'container does not exist\n');
        if (c.status === 'running' && !rest.includes('--force')) return failResult(text, 1, 'container is running\n');
        if (c.status === 'running') this.#stop(id, c);
        this.containers.delete(id);
        this.events.push({ kind: 'container-delete', id });
        return okResult(text);
      }
      case 'exec': {
        const [id, ...inside] = rest;
        const c = this.containers.get(id!);
        if (c === undefined || c.status !== 'running') return failResult(text, 1, `cannot exec in a stopped container\n`);
        return this.#inside(id!, c, inside, text);
      }
      default:
        return failResult(text, 1, `fake runc: unknown command ${verb}\n`);
    }
  }

  #start(id: string, bundle: string, text: string): RunResult {
    const existing = this.containers.get(id);
    if (existing !== undefined) return failResult(text, 1, `container with id exists: ${id}\n`);
    const c: FakeContainer = {
      status: 'running',
      pid: this.#nextPid++,
      // Now, as runc's: whether a container started after its bundle last changed depends on it.
      created: new Date((this.#clock = Math.max(Date.now(), this.#clock + 1))).toISOString(),
      bundle,
      services: new Map(),
      systemState: 'running',
    };
    this.containers.set(id, c);
    this.events.push({ kind: 'container-start', id });
    for (const unit of ['containerd', 'kubelet']) {
      if (!this.#isEnabled(id, c, unit)) continue;
      c.services.set(unit, { active: true, pid: this.#nextPid++ });
      this.events.push({ kind: 'service-boot', id, unit });
    }
    return okResult(text);
  }

  #wantsFile(c: FakeContainer, unit: string): string {
    return path.join(c.bundle, 'rootfs/etc/systemd/system/multi-user.target.wants', `${unit.replace(/\.service$/, '')}.service`);
  }

  #isEnabled(id: string, c: FakeContainer, unit: string): boolean {
    return c.bundle === '' ? (this.#enabled.get(id)?.has(unit) ?? false) : existsSync(this.#wantsFile(c, unit));
  }

  #enable(id: string, c: FakeContainer, unit: string): void {
    if (c.bundle === '') {
      this.#enabled.set(id, new Set([...(this.#enabled.get(id) ?? []), unit]));
      return;
    }
    mkdirSync(path.dirname(this.#wantsFile(c, unit)), { recursive: true });
    writeFileSync(this.#wantsFile(c, unit), '');
  }

  #ctr(id: string, c: FakeContainer, args: readonly string[], text: string): RunResult {
    if (!c.services.get('containerd')?.active) return failResult(text, 1, 'ctr: failed to dial "/run/containerd/containerd.sock"\n');
    const rest = args[0] === '-n' ? args.slice(2) : args;
    if (rest[0] !== 'images') return okResult(text, 'Client:\n  Version: 1.6.20 (fake)\nServer:\n  Version: 1.6.20 (fake)\n');
    let store = this.images.get(id);
    if (store === undefined) this.images.set(id, (store = new Map()));
    const digest = (ref: string): string => `sha256:${Buffer.from(ref).toString('hex').padEnd(64, '0').slice(0, 64)}`;
    switch (rest[1]) {
      case 'import': {
        const archive = rest[2] ?? '';
        const name = path.basename(archive, '.tar');
        if (name.startsWith('bad')) return failResult(text, 1, 'ctr: unexpected EOF\n');
        const ref = `nodegraph.test/${name}:1`;
        store.set(ref, digest(ref));
        this.events.push({ kind: 'image-import', id, archive });
        return okResult(text, `unpacking ${ref} (${digest(ref)})...done\n`);
      }
      case 'ls':
        return okResult(text, ['REF TYPE DIGEST SIZE PLATFORMS LABELS', ...[...store].map(([ref, d]) => `${ref} application/vnd.oci.image.manifest.v1+json ${d} 10.6KiB linux/amd64 -`)].join('\n') + '\n');
      case 'rm': {
        const refs = rest.slice(2);
        for (const ref of refs) store.delete(ref);
        this.events.push({ kind: 'image-remove', id, refs });
        return okResult(text, `${refs.join('\n')}\n`);
      }
      default:
        return failResult(text, 1, `fake ctr: unknown command ${rest.join(' ')}\n`);
    }
  }

  #journal(c: FakeContainer, unit: string, text: string): RunResult {
    const how = this.#options.failingUnits?.[unit];
    if (how === undefined || !c.services.get(unit)?.failed) return okResult(text, '-- No entries --\n');
    return okResult(
      text,
      `Dec 05 01:00:00 systemd[1]: Started ${unit}.service.\n` +
        `Dec 05 01:00:00 systemd[1]: ${unit}.service: Main process exited, code=exited, status=${how}\n` +
        `Dec 05 01:00:00 systemd[1]: ${unit}.service: Failed with result 'exit-code'.\n`,
    );
  }

  #stop(id: string, c: FakeContainer): void {
    c.status = 'stopped';
    c.services.clear();
    this.events.push({ kind: 'container-stop', id });
  }

  #inside(id: string, c: FakeContainer, argv: readonly string[], text: string): RunResult {
    const [program, ...args] = argv;
    if (program === 'ctr') return this.#ctr(id, c, args, text);
    if (program === 'mount') return okResult(text);
    // systemctl and journalctl take `kubelet` and `kubelet.service` alike.
    if (program === 'journalctl') return this.#journal(c, (args[args.indexOf('--unit') + 1] ?? '').replace(/\.service$/, ''), text);
    if (program !== 'systemctl') return failResult(text, 127, `fake container: no ${program}\n`);
    const [verb, ...rest] = args;
    const unit = (rest.at(-1) ?? '').replace(/\.service$/, '');
    const service = (): FakeService => {
      let s = c.services.get(unit);
      if (s === undefined) c.services.set(unit, (s = { active: false, pid: 0 }));
      return s;
    };
    // A unit whose process cannot run: systemd starts it (Type=simple returns at once), and it fails.
    const started = (s: FakeService): void => {
      if (this.#options.failingUnits?.[unit] === undefined) Object.assign(s, { active: true, pid: this.#nextPid++, failed: false });
      else Object.assign(s, { active: false, pid: 0, failed: true });
    };
    switch (verb) {
      case 'is-system-running':
        return c.systemState === 'running' ? okResult(text, 'running\n') : failResult(text, 1, '', `${c.systemState}\n`);
      case 'daemon-reload':
        this.events.push({ kind: 'daemon-reload', id });
        return okResult(text);
      case 'start': {
        const s = service();
        const already = s.active;
        if (!s.active) started(s);
        this.events.push({ kind: 'service-start', id, unit, already });
        return okResult(text);
      }
      case 'restart': {
        started(service());
        this.events.push({ kind: 'service-restart', id, unit });
        return okResult(text);
      }
      case 'stop':
        Object.assign(service(), { active: false, pid: 0 });
        this.events.push({ kind: 'service-stop', id, unit });
        return okResult(text);
      case 'enable': {
        this.#enable(id, c, unit);
        this.events.push({ kind: 'service-enable', id, unit });
        if (!rest.includes('--now')) return okResult(text);
        const s = service();
        const already = s.active;
        if (!s.active) started(s);
        this.events.push({ kind: 'service-start', id, unit, already });
        return okResult(text);
      }
      case 'is-enabled':
        return this.#isEnabled(id, c, unit) ? okResult(text, 'enabled\n') : failResult(text, 1, '', 'disabled\n');
      case 'list-units':
        return okResult(text, [...c.services].filter(([, s]) => s.failed).map(([name]) => `${name}.service loaded failed failed ${name}\n`).join(''));
      case 'reload':
      case 'disable':
        return okResult(text);
      case 'is-active': {
        const s = service();
        return s.active ? okResult(text, 'active\n') : failResult(text, 3, '', s.failed ? 'failed\n' : 'inactive\n');
      }
      case 'status': {
        const s = service();
        const how = this.#options.failingUnits?.[unit];
        const head = `${s.active ? '●' : '×'} ${unit}.service\n     Loaded: loaded (/etc/systemd/system/${unit}.service; enabled; preset: enabled)\n`;
        if (s.active) return okResult(text, `${head}     Active: active (running)\n   Main PID: ${s.pid} (${unit})\n`);
        if (!s.failed || how === undefined) return failResult(text, 3, '', `${head}     Active: inactive (dead)\n`);
        return failResult(text, 3, '', `${head}     Active: failed (Result: exit-code)\n   Main PID: 4242 (code=exited, status=${how})\n`);
      }
      case 'show': {
        const s = service();
        if (rest.includes('--value')) return okResult(text, `${s.pid}\n`);
        const [active, sub, result] = s.active ? ['active', 'running', 'success'] : s.failed ? ['failed', 'failed', 'exit-code'] : ['inactive', 'dead', 'success'];
        return okResult(text, `ActiveState=${active}\nSubState=${sub}\nNRestarts=0\nMainPID=${s.pid}\nResult=${result}\n`);
      }
      default:
        return failResult(text, 1, `fake systemctl: unknown command ${verb}\n`);
    }
  }

  #hostSystemctl(args: readonly string[], text: string): RunResult {
    const [verb, ...rest] = args;
    const unit = rest.at(-1) ?? '';
    const slot = /^nodegraph-(.+)\.service$/.exec(unit)?.[1];
    this.events.push({ kind: 'host-unit', verb: verb ?? '', unit });
    switch (verb) {
      case 'daemon-reload':
        return okResult(text);
      case 'enable':
        this.hostUnits.set(unit, { enabled: true });
        return okResult(text);
      case 'disable':
        this.hostUnits.set(unit, { enabled: false });
        return okResult(text);
      case 'restart':
      case 'start': {
        if (slot === undefined) return okResult(text);
        const c = this.containers.get(slot);
        if (c !== undefined && verb === 'start' && c.status === 'running') return okResult(text);
        if (c !== undefined) {
          if (c.status === 'running') this.#stop(slot, c);
          this.containers.delete(slot);
        }
        return this.#start(slot, '', text);
      }
      case 'stop': {
        const c = slot === undefined ? undefined : this.containers.get(slot);
        if (c !== undefined && slot !== undefined) {
          if (c.status === 'running') this.#stop(slot, c);
          this.containers.delete(slot);
        }
        return okResult(text);
      }
      default:
        return okResult(text);
    }
  }

  #helper(args: readonly string[], text: string): RunResult {
    const [verb, ...rest] = args;
    switch (verb) {
      case 'stop-container': {
        const id = rest[2]!;
        // Its supervising unit first, as the helper does on a host with systemd.
        if (rest[4] !== undefined) this.#hostSystemctl(['stop', rest[4]], text);
        const c = this.containers.get(id);
        if (c === undefined) return okResult(text, `container ${id} does not exist\n`);
        if (c.status === 'running') this.#stop(id, c);
        this.containers.delete(id);
        this.events.push({ kind: 'container-delete', id });
        return okResult(text);
      }
      case 'service': {
        const id = rest[2]!;
        const c = this.containers.get(id);
        if (c === undefined || c.status !== 'running') return okResult(text, `container ${id} is not running; nothing to do\n`);
        return this.#inside(id, c, ['systemctl', ...rest.slice(3)], text);
      }
      case 'unmount-below':
        this.events.push({ kind: 'unmount-below', path: rest[0]! });
        return okResult(text);
      case 'kernel-modules':
        return okResult(
          text,
          rest.map((m) => `${m} ${this.loadedModules.has(m) ? 'loaded' : this.#options.builtinModules?.includes(m) ? 'built-in' : 'missing'}\n`).join(''),
        );
      case 'unit-remove':
        rmSync(rest[0]!, { force: true });
        this.hostUnits.delete(rest[1]!);
        this.events.push({ kind: 'host-unit', verb: 'remove', unit: rest[1]! });
        return okResult(text);
      default:
        return failResult(text, 1, `fake helper: unknown command ${verb}\n`);
    }
  }
}

/** The helper's commands that only touch folders: run for real. */
const FOLDER_VERBS = new Set(['remove', 'remove-unless-mounted', 'prune']);

function stripGlobals(args: readonly string[]): string[] {
  const out = [...args];
  while (out[0] === '--root') out.splice(0, 2);
  return out;
}
