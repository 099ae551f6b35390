// A fake process runner for the node graph: it records every command and
// answers like runc, systemctl (on the host and inside a container), ctr
// and the node's lifecycle helper would, from a small model of the world.
// Commands it does not model (tar, sh scripts the tests want to really run)
// can be passed through to the real runner.

import { rmdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Command } from '../../src/nodefile/types.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import { describeCommand, type ProcessRunner, type RunOptions, type RunResult } from '../../src/process-runner.ts';

export interface FakeService {
  active: boolean;
  pid: number;
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
  readonly containers = new Map<string, FakeContainer>();
  readonly hostUnits = new Map<string, { enabled: boolean }>();
  readonly #real = new LocalRunner();
  readonly #options: FakeRunnerOptions;
  #nextPid = 1000;
  #clock = 0;

  constructor(options: FakeRunnerOptions) {
    this.#options = options;
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
    const scripted = this.#options.answer?.(argv);
    if (scripted !== undefined) return { ...okResult(text), ...scripted };
    if (this.#options.passthrough?.(argv)) return this.#real.run(command, options);
    return this.#model(argv, text);
  }

  #model(argv: readonly string[], text: string): RunResult {
    // runDetached wraps runc in `sh -c 'log=$1; shift; exec "$@" …' sh LOG RUNC …`.
    if (argv[0] === 'sh' && argv[1] === '-c' && argv[2]?.startsWith('log=$1; shift; exec "$@"')) return this.#model(argv.slice(5), text);
    const program = path.basename(argv[0] ?? '');
    if (program === 'runc') return this.#runc(stripGlobals(argv.slice(1)), text);
    if (program === 'systemctl') return this.#hostSystemctl(argv.slice(1), text);
    if (program === 'node-helper') return this.#helper(argv.slice(1), text);
    if (program === 'rm' && argv[1] === '-rf') return this.#helper(['remove', argv.at(-1)!], text);
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
    this.containers.set(id, {
      status: 'running',
      pid: this.#nextPid++,
      created: new Date(Date.UTC(2025, 0, 1, 0, 0, this.#clock++)).toISOString(),
      bundle,
      services: new Map(),
      systemState: 'running',
    });
    this.events.push({ kind: 'container-start', id });
    return okResult(text);
  }

  #stop(id: string, c: FakeContainer): void {
    c.status = 'stopped';
    c.services.clear();
    this.events.push({ kind: 'container-stop', id });
  }

  #inside(id: string, c: FakeContainer, argv: readonly string[], text: string): RunResult {
    const [program, ...args] = argv;
    if (program === 'ctr') {
      return c.services.get('containerd')?.active ? okResult(text, 'Client:\n  Version: 1.6.20 (fake)\nServer:\n  Version: 1.6.20 (fake)\n') : failResult(text, 1, 'ctr: failed to dial "/run/containerd/containerd.sock"\n');
    }
    if (program === 'mount') return okResult(text);
    if (program !== 'systemctl') return failResult(text, 127, `fake container: no ${program}\n`);
    const [verb, ...rest] = args;
    const unit = rest.at(-1) ?? '';
    const service = (): FakeService => {
      let s = c.services.get(unit);
      if (s === undefined) c.services.set(unit, (s = { active: false, pid: 0 }));
      return s;
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
        if (!s.active) Object.assign(s, { active: true, pid: this.#nextPid++ });
        this.events.push({ kind: 'service-start', id, unit, already });
        return okResult(text);
      }
      case 'restart': {
        Object.assign(service(), { active: true, pid: this.#nextPid++ });
        this.events.push({ kind: 'service-restart', id, unit });
        return okResult(text);
      }
      case 'stop':
        Object.assign(service(), { active: false, pid: 0 });
        this.events.push({ kind: 'service-stop', id, unit });
        return okResult(text);
      case 'reload':
      case 'enable':
      case 'disable':
        return okResult(text);
      case 'is-active':
        return service().active ? okResult(text, 'active\n') : failResult(text, 3, '', 'inactive\n');
      case 'show':
        return okResult(text, `${service().pid}\n`);
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
      case 'remove':
      case 'remove-unless-mounted': {
        const target = path.resolve(rest[0]!);
        const sandbox = path.resolve(this.#options.sandbox);
        if (!target.startsWith(`${sandbox}/`)) return failResult(text, 1, `fake helper: ${target} is outside the sandbox\n`);
        rmSync(target, { recursive: true, force: true });
        this.events.push({ kind: 'remove', path: target });
        return okResult(text);
      }
      case 'prune':
        for (const dir of rest) {
          try {
            rmdirSync(dir);
          } catch {
            // not empty, or not there: kept
          }
        }
        return okResult(text);
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

function stripGlobals(args: readonly string[]): string[] {
  const out = [...args];
  while (out[0] === '--root') out.splice(0, 2);
  return out;
}
