// The integration rig: a temporary folder, files written into it, the real
// CLI run against it as a child process, its output and exit code awaited.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const cli = path.join(repo, 'bin/nodegraph.js');
/** The type-only import a Nodefile in a temp folder uses. */
export const apiTypes = path.join(repo, 'src/nodefile/types.ts');

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export class Rig {
  readonly dir: string;

  constructor(prefix = 'nodegraph-test-') {
    this.dir = mkdtempSync(path.join(tmpdir(), prefix));
  }

  path(...parts: string[]): string {
    return path.join(this.dir, ...parts);
  }

  write(file: string, content: string): string {
    const full = this.path(file);
    mkdirSync(path.dirname(full), { recursive: true });
    writeFileSync(full, content);
    return full;
  }

  read(file: string): string {
    return readFileSync(this.path(file), 'utf8');
  }

  exists(file: string): boolean {
    return existsSync(this.path(file));
  }

  /** A Nodefile whose body is `body`, with `ng` in scope. */
  nodefile(body: string, file = 'Nodefile.ts'): string {
    return this.write(file, `import type { NodefileApi } from ${JSON.stringify(apiTypes)};\nexport default (ng: NodefileApi) => {\n${body}\n};\n`);
  }

  spawn(args: readonly string[], env: Record<string, string> = {}): ChildProcess {
    return spawn(process.execPath, [cli, ...args], {
      cwd: this.dir,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: undefined, CI: '1', ...env } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  run(args: readonly string[], env: Record<string, string> = {}): Promise<RunResult> {
    const child = this.spawn(args, env);
    return collect(child);
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function collect(child: ChildProcess): Promise<RunResult> {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Polls until `what` holds; throws after `ms`. */
export async function until(what: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether the process runs: not gone, and not a zombie waiting for its parent (killed, not reaped yet). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z';
  } catch {
    return false;
  }
}
