// The spawn server: a small Node process that starts task commands on the
// engine's behalf (see SpawnServer in runner.ts). Node's spawn forks the whole
// calling process on its main thread; in an engine of 100-500 MiB that is
// 3-7 ms of mostly system CPU per task, here it is a process of a few dozen MiB
// and another thread of execution.
//
// Protocol: newline-delimited JSON, requests on stdin, replies on stdout.
//   {"t":"env","env":{…}}                        the environment commands start from
//   {"t":"run","id":1,"file":…,"args":[…],"cwd":…,"env":{…}?}
//   {"t":"kill","id":1,"signal":"SIGTERM"}
// Replies: {"ready":true} once, then per run
//   {"id":1,"code":0|null,"signal":null|"SIG…","error":"…"?,"stdout":…,"stderr":…,"output":…?}
// with output left out when one of stdout and stderr is empty (it is then the
// other one), or {"id":1,"thrown":"…"} when spawn threw.
//
// It imports nothing but node:child_process, group.ts and lines.ts, and is run as plain JavaScript
// in a package (dist/) and type-stripped in a checkout: erasable syntax only.

import { spawn, type ChildProcess } from 'node:child_process';
import { signalGroup } from './group.ts';
import { eachLine } from './lines.ts';

interface RunRequest {
  readonly t: 'run';
  readonly id: number;
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env?: Readonly<Record<string, string>>;
}
interface KillRequest {
  readonly t: 'kill';
  readonly id: number;
  readonly signal: NodeJS.Signals;
}
interface EnvRequest {
  readonly t: 'env';
  readonly env: Readonly<Record<string, string>>;
}
type Request = RunRequest | KillRequest | EnvRequest;

let base: NodeJS.ProcessEnv = process.env;
const running = new Map<number, ChildProcess>();

// Ctrl-C (or a terminal's hangup) signals the whole foreground process group:
// the engine decides what to stop, and this process has to live to stop its
// children and report how they ended.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => {});
process.on('SIGHUP', () => {});

// The engine gone (stdin closed, stdout broken): nothing to report to.
const quit = (): never => process.exit(0);
process.stdin.on('end', quit);
process.stdin.on('error', quit);
process.stdout.on('error', quit);

function send(reply: object): void {
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}

function start(request: RunRequest): void {
  const { id } = request;
  let child: ChildProcess;
  try {
    child = spawn(request.file, request.args, {
      cwd: request.cwd,
      env: request.env === undefined ? base : { ...base, ...request.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: see group.ts
    });
  } catch (error) {
    send({ id, thrown: error instanceof Error ? error.message : String(error) });
    return;
  }
  running.set(id, child);
  const chunks: Buffer[] = [];
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    chunks.push(d);
    out.push(d);
  });
  child.stderr!.on('data', (d: Buffer) => {
    chunks.push(d);
    err.push(d);
  });
  let error: string | undefined;
  child.on('error', (e) => {
    error = e.message;
  });
  child.on('close', (code, signal) => {
    running.delete(id);
    send({
      id,
      code,
      signal,
      error,
      stdout: Buffer.concat(out).toString(),
      stderr: Buffer.concat(err).toString(),
      output: out.length > 0 && err.length > 0 ? Buffer.concat(chunks).toString() : undefined,
    });
  });
}

function handle(line: string): void {
  const request = JSON.parse(line) as Request;
  if (request.t === 'run') start(request);
  else if (request.t === 'kill') {
    const child = running.get(request.id);
    if (child !== undefined) signalGroup(child, request.signal);
  }
  else if (request.t === 'env') base = request.env;
}

eachLine(process.stdin, handle);

send({ ready: true });
