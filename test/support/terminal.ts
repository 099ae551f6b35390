// A real terminal for the live view: the CLI run under tmux (its own server,
// its own socket), and the screen read back as a person would see it.

import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { cli, until } from './rig.ts';

export const hasTmux = spawnSync('tmux', ['-V']).status === 0;

export class Terminal {
  readonly #socket: string;

  /** Starts `nodegraph ARGS` in a `columns`×`rows` terminal, in `cwd`; the pane stays after it exits. `stdout`: a file its stdout goes to instead. */
  constructor(
    cwd: string,
    args: readonly string[],
    options: { readonly columns?: number; readonly rows?: number; readonly env?: Readonly<Record<string, string>>; readonly stdout?: string } = {},
  ) {
    this.#socket = path.join(cwd, '.tmux.sock');
    const size = { columns: options.columns ?? 100, rows: options.rows ?? 30 };
    const env = Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const quote = (a: string): string => `'${a.replaceAll("'", "'\\''")}'`;
    const command = ['env', '-u', 'CI', '-u', 'FORCE_COLOR', 'NO_COLOR=1', ...env, process.execPath, cli, ...args].map(quote).join(' ') + (options.stdout === undefined ? '' : ` > ${quote(options.stdout)}`);
    execFileSync('tmux', ['-S', this.#socket, '-f', '/dev/null', 'new-session', '-d', '-x', String(size.columns), '-y', String(size.rows), '-c', cwd, `${command}; echo "exit $?"; sleep 600`]);
  }

  /** The screen as it stands, trailing blanks dropped. */
  screen(): string {
    const text = execFileSync('tmux', ['-S', this.#socket, 'capture-pane', '-p'], { encoding: 'utf8' });
    return text.replace(/\s+$/, '');
  }

  /** Everything the pane holds, its scrollback (tmux's history) and then its screen, trailing blanks dropped. */
  scrollback(): string {
    // -J joins a line the terminal wrapped, and keeps the blanks its rows end with.
    const text = execFileSync('tmux', ['-S', this.#socket, 'capture-pane', '-p', '-J', '-S', '-'], { encoding: 'utf8' });
    return text.replace(/ +$/gm, '').replace(/\s+$/, '');
  }

  /** Waits until the screen matches, and returns it. */
  async waitFor(pattern: RegExp, ms = 20_000): Promise<string> {
    let last = '';
    await until(() => pattern.test((last = this.screen())), ms).catch(() => {
      throw new Error(`the screen never matched ${pattern}:\n${last}`);
    });
    return last;
  }

  /** Types `keys` (tmux's names: `C-c`). */
  keys(...keys: string[]): void {
    execFileSync('tmux', ['-S', this.#socket, 'send-keys', ...keys]);
  }

  close(): void {
    spawnSync('tmux', ['-S', this.#socket, 'kill-server']);
  }
}
