// Running the benchmark's child processes: each in its own process group, so
// that a timeout or a Ctrl-C kills hyperfine and whatever it was running.

import { spawn, type StdioOptions } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

export interface Finished {
  readonly code: number | null;
  readonly timedOut: boolean;
  readonly stdout: string;
  readonly stderr: string;
}

let current: number | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (current !== undefined) {
      try {
        process.kill(-current, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    process.stderr.write(`\nbench: ${signal}, stopped\n`);
    process.exit(130);
  });
}

/** Spawns argv without a shell; stdout goes to `stdoutFile` when given (large outputs), else is collected. */
export function exec(argv: readonly string[], options: { cwd: string; timeoutMs: number; stdoutFile?: string }): Promise<Finished> {
  let fd: number | undefined;
  let stdio: StdioOptions = ['ignore', 'pipe', 'pipe'];
  if (options.stdoutFile !== undefined) {
    fd = openSync(options.stdoutFile, 'w');
    stdio = ['ignore', fd, 'pipe'];
  }
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: options.cwd, stdio, detached: true });
    current = child.pid;
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      if (stdout.length < 50_000_000) stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 1_000_000) stderr += chunk;
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, options.timeoutMs);
    const done = (code: number | null): void => {
      clearTimeout(timer);
      current = undefined;
      if (fd !== undefined) closeSync(fd);
      resolve({ code, timedOut, stdout, stderr });
    };
    child.on('error', (error) => {
      stderr += String(error);
      done(null);
    });
    child.on('close', (code) => done(code));
  });
}

/** exec, and throw unless it exits 0; returns its stdout. */
export async function must(argv: readonly string[], cwd: string, timeoutMs = 600_000): Promise<string> {
  const result = await exec(argv, { cwd, timeoutMs });
  if (result.code !== 0) {
    throw new Error(`${argv.join(' ')} failed (${result.timedOut ? 'timed out' : `exit ${result.code}`}): ${result.stderr.slice(-2000)}`);
  }
  return result.stdout;
}

const started = performance.now();
export const elapsedMinutes = (): number => (performance.now() - started) / 60_000;

/** A progress line on stderr, stamped with the time since the benchmark started. */
export function log(message: string): void {
  const s = Math.round((performance.now() - started) / 1000);
  process.stderr.write(`[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${message}\n`);
}
