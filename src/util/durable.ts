// Files that must survive a crash whole: written beside their place, synced,
// renamed over it, and the folder synced, so a reader finds the old content or
// the new, never a mix, even after a power loss.

import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fsyncDir } from './fsync.ts';

/** `mode`: a new file's (0600: the state's files are the owner's alone). */
export function writeDurably(file: string, content: string | Uint8Array, mode = 0o600): void {
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    const fd = openSync(temp, 'w', mode);
    try {
      const bytes = typeof content === 'string' ? Buffer.from(content) : content;
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  fsyncDir(path.dirname(file));
}

/** Syncs a file's content to disk (a copy that must be there after a power loss). */
export function fsyncFile(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** From this many files a batch is synced by one syncfs of their filesystem rather than an fsync each. */
const SYNCFS_FROM = 32;
/** coreutils' sync, whose `-f` is syncfs(2): Node has no binding for it. */
const SYNC = ['/usr/bin/sync', '/bin/sync'];

/**
 * Files of one folder written together and made durable together, the way
 * writeDurably makes one: each is written beside its place (`add`), then
 * `commit` syncs them all — one syncfs where there are many, an fsync each
 * otherwise — renames each into place and syncs the folder. A file has its
 * name only once its content is durable, and `commit` returns only once the
 * names are, so what names them is written after it. Files left by a kill are
 * temporaries (`.<name>.<pid>.tmp`) no one names.
 */
export class DurableBatch {
  readonly dir: string;
  readonly #names = new Set<string>();
  readonly #onStep: ((step: 'written' | 'synced' | 'named') => void) | undefined;

  /** `onStep`: for crash tests, called after each step (a kill there is a crash there). */
  constructor(dir: string, onStep?: (step: 'written' | 'synced' | 'named') => void) {
    this.dir = dir;
    this.#onStep = onStep;
  }

  has(name: string): boolean {
    return this.#names.has(name);
  }

  /** Writes `content` beside `dir/name` (`mode`: the file's; no fsync yet). */
  add(name: string, content: string | Uint8Array, mode = 0o600): void {
    if (this.#names.has(name)) return;
    const temp = this.#temp(name);
    try {
      writeFileSync(temp, content, { mode, flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A killed run's (with this pid): nothing names it.
      rmSync(temp, { force: true });
      writeFileSync(temp, content, { mode, flag: 'wx' });
    }
    this.#names.add(name);
    this.#onStep?.('written');
  }

  /** Makes every added file durable under its name, then the folder. */
  commit(): void {
    const temps = [...this.#names].map((name) => this.#temp(name));
    if (temps.length < SYNCFS_FROM || !syncfs(this.dir)) for (const temp of temps) fsyncFile(temp);
    this.#onStep?.('synced');
    for (const name of this.#names) {
      renameSync(this.#temp(name), path.join(this.dir, name));
      this.#onStep?.('named');
    }
    this.#names.clear();
    fsyncDir(this.dir);
  }

  /** Removes what was added and not committed. */
  discard(): void {
    for (const name of this.#names) rmSync(this.#temp(name), { force: true });
    this.#names.clear();
  }

  #temp(name: string): string {
    return path.join(this.dir, `.${name}.${process.pid}.tmp`);
  }
}

/** syncfs(2) of the filesystem holding `dir`, by `sync -f`; false when it could not be run or failed (then fsync each file). */
function syncfs(dir: string): boolean {
  const program = SYNC.find((p) => existsSync(p));
  if (program === undefined) return false;
  return process.getBuiltinModule('node:child_process').spawnSync(program, ['-f', dir], { stdio: 'ignore' }).status === 0;
}
