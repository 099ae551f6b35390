// What a Nodefile's evaluation reads, recorded while it runs.
//
// The functions of node:fs, node:fs/promises and node:child_process are
// replaced on their module objects for the duration of one evaluation, and
// `syncBuiltinESMExports` makes ESM named imports (`import { readFileSync }
// from 'node:fs'`) see the replacement too; `finally` puts the originals
// back. A replacement records only calls made in the evaluation's own async
// context (an AsyncLocalStorage): a watcher's stat that runs meanwhile is
// not the Nodefile's, and neither is a task action called later (the
// originals are back by then).
//
// What is recorded, per absolute path:
//   content  readFile*, createReadStream, open* for reading: the file's SHA-256
//            (of the bytes returned, when the call returns them; else read at the end)
//   listing  readdir*, opendir*: the folder's entry names
//   probe    exists*, stat*, lstat*, access*: the kind found (absent, file, dir, other);
//            a stat's size and times are not kept
// and, named rather than kept (`outside`): a path below /proc, /sys or /dev
// (a kernel interface: its content is the machine's state, which no
// generation can put back), a path that is no regular file (a FIFO, a socket),
// a read through a descriptor the evaluation did not open by path (stdin), a
// path that could not be read (EACCES), and every process run at load (what a
// child reads cannot be seen from here).

import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Built-ins by getBuiltinModule (see cli/main.ts). node:fs/promises and
// node:child_process are not loaded here at all: a no-op never loads them (the
// latter loads node:net), so each is patched when the evaluation first asks
// for it, or at the start if something loaded it already.
const fs = process.getBuiltinModule('node:fs');
const { syncBuiltinESMExports } = process.getBuiltinModule('node:module');
const { AsyncLocalStorage } = process.getBuiltinModule('node:async_hooks');
const { createHash } = process.getBuiltinModule('node:crypto');

export type ProbeKind = 'absent' | 'file' | 'dir' | 'other';

export interface Probe {
  readonly path: string;
  readonly kind: ProbeKind;
  /** A listed folder's entry names, sorted. */
  readonly entries?: readonly string[];
}

export type OutsideWhy = 'kernel' | 'special' | 'fd' | 'unreadable' | 'process';

/** A read that cannot be captured: named in `plan`, never silently left out. */
export interface OutsideRead {
  readonly why: OutsideWhy;
  /** The path read (kernel, special, unreadable). */
  readonly path?: string;
  /** The descriptor read (fd). */
  readonly fd?: number;
  /** The process run (process): file and arguments. */
  readonly command?: readonly string[];
  /** The error code of an unreadable path. */
  readonly code?: string;
}

export interface EvaluationReads {
  /** Regular files whose content the evaluation read: absolute path → hex SHA-256. */
  readonly files: ReadonlyMap<string, string>;
  /** Paths the evaluation probed or listed but did not read, with what it found. */
  readonly probes: readonly Probe[];
  readonly outside: readonly OutsideRead[];
}

export const NO_READS: EvaluationReads = { files: new Map(), probes: [], outside: [] };

/** Paths whose content is the kernel's, not a file's. */
const KERNEL = ['/proc', '/sys', '/dev'];

const inKernel = (p: string): boolean => KERNEL.some((k) => p === k || p.startsWith(`${k}/`));

/** One evaluation's reads as they are made; `finish` turns them into EvaluationReads. */
class Recorder {
  readonly contents = new Map<string, string | undefined>();
  readonly listed = new Set<string>();
  readonly probed = new Set<string>();
  readonly outside = new Map<string, OutsideRead>();
  /** Descriptors the evaluation opened by path. */
  readonly fds = new Map<number, string>();

  content(p: string, sha256?: string): void {
    if (inKernel(p)) return this.#outside({ why: 'kernel', path: p });
    if (sha256 !== undefined || !this.contents.has(p)) this.contents.set(p, sha256 ?? this.contents.get(p));
  }

  listing(p: string): void {
    if (inKernel(p)) return this.#outside({ why: 'kernel', path: p });
    this.listed.add(p);
  }

  probe(p: string): void {
    if (inKernel(p)) return this.#outside({ why: 'kernel', path: p });
    this.probed.add(p);
  }

  fd(fd: number): void {
    if (!this.fds.has(fd)) this.#outside({ why: 'fd', fd });
  }

  process(command: readonly string[]): void {
    this.#outside({ why: 'process', command });
  }

  #outside(read: OutsideRead): void {
    this.outside.set(JSON.stringify(read), read);
  }

  /** Hashes what was read without its bytes passing through here; sorts out absent and special paths. */
  finish(keep: (p: string) => boolean): EvaluationReads {
    const files = new Map<string, string>();
    const probes = new Map<string, Probe>();
    const outside = new Map(this.outside);
    const named = (read: OutsideRead): void => void outside.set(JSON.stringify(read), read);
    for (const [p, known] of this.contents) {
      if (!keep(p)) continue;
      const kind = kindOf(p);
      if (kind === 'absent') probes.set(p, { path: p, kind });
      else if (kind === 'dir') probes.set(p, { path: p, kind });
      else if (kind !== 'file') named({ why: 'special', path: p });
      else {
        const sha256 = known ?? hashFile(p);
        if (typeof sha256 === 'string') files.set(p, sha256);
        else named({ why: 'unreadable', path: p, code: sha256.code });
      }
    }
    for (const p of this.listed) {
      if (!keep(p) || files.has(p)) continue;
      const kind = kindOf(p);
      if (kind !== 'dir') probes.set(p, { path: p, kind: kind === 'special' ? 'other' : kind });
      else {
        try {
          // The state folder is no entry of the project's: an apply makes it.
          probes.set(p, { path: p, kind, entries: original.readdirSync(p).filter((e) => keep(path.join(p, e))).sort() });
        } catch (error) {
          named({ why: 'unreadable', path: p, code: (error as NodeJS.ErrnoException).code ?? 'error' });
        }
      }
    }
    for (const p of this.probed) {
      if (!keep(p) || files.has(p) || probes.has(p)) continue;
      const kind = kindOf(p);
      probes.set(p, { path: p, kind: kind === 'special' ? 'other' : kind });
    }
    return {
      files,
      probes: [...probes.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
      outside: [...outside.values()].filter((r) => r.path === undefined || keep(r.path)),
    };
  }
}

function kindOf(p: string): ProbeKind | 'special' {
  try {
    const stat = original.statSync(p);
    return stat.isFile() ? 'file' : stat.isDirectory() ? 'dir' : 'special';
  } catch {
    return 'absent';
  }
}

function hashFile(p: string): string | { code: string } {
  let fd: number;
  try {
    fd = original.openSync(p, 'r');
  } catch (error) {
    return { code: (error as NodeJS.ErrnoException).code ?? 'error' };
  }
  try {
    const digest = createHash('sha256');
    const buffer = Buffer.allocUnsafe(256 * 1024);
    for (let n = original.readSync(fd, buffer); n > 0; n = original.readSync(fd, buffer)) digest.update(buffer.subarray(0, n));
    return digest.digest('hex');
  } catch (error) {
    return { code: (error as NodeJS.ErrnoException).code ?? 'error' };
  } finally {
    fs.closeSync(fd);
  }
}

const sha256Of = (data: Buffer | Uint8Array): string => createHash('sha256').update(data).digest('hex');

type Fn = (...args: any[]) => any;

const fsObject = fs as unknown as Record<string, Fn>;
/** The functions the recorder itself uses, as Node made them. */
const original = {
  readFileSync: fs.readFileSync,
  readdirSync: fs.readdirSync,
  statSync: fs.statSync,
  openSync: fs.openSync,
  readSync: fs.readSync,
};

const storage = new AsyncLocalStorage<Recorder>();
/** Set while a replacement runs: a call it makes itself (readFileSync → openSync) is not a second read. */
let inside = 0;

/** The absolute path a path-like argument names, or undefined for a descriptor or something else. */
function pathOf(arg: unknown): string | undefined {
  if (typeof arg === 'string') return path.resolve(arg);
  if (arg instanceof URL) return arg.protocol === 'file:' ? fileURLToPath(arg) : undefined;
  if (Buffer.isBuffer(arg)) return path.resolve(arg.toString());
  return undefined;
}

/** Whether `open` flags may read without first emptying the file. */
function readsOpen(flags: unknown): boolean {
  if (flags === undefined || flags === null) return true;
  if (typeof flags === 'number') {
    const { O_WRONLY, O_TRUNC } = fs.constants;
    return (flags & O_WRONLY) === 0 && (flags & O_TRUNC) === 0;
  }
  return typeof flags === 'string' && (flags.startsWith('r') || flags.startsWith('sr') || flags === 'a+' || flags === 'as+');
}

const flagOf = (options: unknown): unknown => (typeof options === 'object' && options !== null ? (options as { flag?: unknown }).flag : undefined);
const encodingOf = (options: unknown): BufferEncoding | undefined =>
  typeof options === 'string' ? (options as BufferEncoding) : typeof options === 'object' && options !== null ? ((options as { encoding?: BufferEncoding }).encoding ?? undefined) : undefined;
/** readFile's options with the encoding taken out: the bytes are hashed, then decoded as asked. */
const asBytes = (options: unknown): unknown => (typeof options === 'object' && options !== null ? { ...options, encoding: null } : undefined);

/** Wraps `fn` so that, in an evaluation, `note` sees its arguments (and its result, for sync calls). */
function wrap(fn: Fn, note: (recorder: Recorder, args: unknown[]) => void): Fn {
  return function (this: unknown, ...args: unknown[]) {
    const recorder = storage.getStore();
    if (recorder === undefined || inside > 0) return fn.apply(this, args);
    try {
      note(recorder, args);
    } catch {
      // a path the call itself will refuse: the call says so
    }
    inside++;
    try {
      return fn.apply(this, args);
    } finally {
      inside--;
    }
  };
}

const contentAt = (index = 0) => (r: Recorder, args: unknown[]) => {
  const p = pathOf(args[index]);
  if (p !== undefined) r.content(p);
  else if (typeof args[index] === 'number') r.fd(args[index]);
};
const listingAt = (r: Recorder, args: unknown[]): void => {
  const p = pathOf(args[0]);
  if (p !== undefined) r.listing(p);
};
const probeAt = (r: Recorder, args: unknown[]): void => {
  const p = pathOf(args[0]);
  if (p !== undefined) r.probe(p);
};
const openAt = (r: Recorder, args: unknown[]): void => {
  const p = pathOf(args[0]);
  if (p !== undefined && readsOpen(args[1])) r.content(p);
};
const fdAt = (r: Recorder, args: unknown[]): void => {
  if (typeof args[0] === 'number') r.fd(args[0]);
};
const commandAt = (r: Recorder, args: unknown[]): void => {
  const file = typeof args[0] === 'string' ? args[0] : String(args[0]);
  r.process(Array.isArray(args[1]) ? [file, ...args[1].map(String)] : [file]);
};

/** readFileSync: the bytes it returns are hashed as they are returned. */
function readFileSyncRecorded(this: unknown, file: unknown, options?: unknown): unknown {
  const recorder = storage.getStore();
  const p = pathOf(file);
  if (recorder === undefined || inside > 0 || p === undefined || flagOf(options) !== undefined) {
    return (wrap(original.readFileSync as Fn, contentAt())).call(this, file, options);
  }
  inside++;
  let bytes: Buffer;
  try {
    bytes = original.readFileSync(file as string, asBytes(options) as undefined);
  } catch (error) {
    recorder.content(p);
    throw error;
  } finally {
    inside--;
  }
  recorder.content(p, sha256Of(bytes));
  const encoding = encodingOf(options);
  return encoding === undefined ? bytes : bytes.toString(encoding);
}

type Note = (recorder: Recorder, args: unknown[]) => void;

/** What is replaced on each module object: names and what a call of them notes. */
const FS: readonly [readonly string[], Note][] = [
  [['readFile', 'createReadStream'], contentAt()],
  [['openSync', 'open', 'openAsBlob'], openAt],
  [['readSync', 'read', 'readv', 'readvSync'], fdAt],
  [['readdirSync', 'readdir', 'opendirSync', 'opendir'], listingAt],
  [['existsSync', 'exists', 'statSync', 'stat', 'lstatSync', 'lstat', 'accessSync', 'access'], probeAt],
];
const LAZY: Readonly<Record<string, { readonly loaded: string; readonly names: readonly [readonly string[], Note][] }>> = {
  'fs/promises': {
    loaded: 'NativeModule internal/fs/promises',
    names: [
      [['readFile'], contentAt()],
      [['open'], openAt],
      [['readdir', 'opendir'], listingAt],
      [['stat', 'lstat', 'access'], probeAt],
    ],
  },
  child_process: { loaded: 'NativeModule child_process', names: [[['spawn', 'spawnSync', 'execFile', 'execFileSync', 'exec', 'execSync', 'fork'], commandAt]] },
};

/** What is replaced now, with what was there: put back, in reverse, at the end. */
let undo: (() => void)[] = [];
const lazyDone = new Set<string>();
let active = 0;

function replace(object: Record<string, Fn>, name: string, fn: Fn): void {
  const was = Object.getOwnPropertyDescriptor(object, name);
  if (was === undefined || typeof was.value !== 'function') return;
  object[name] = fn;
  undo.push(() => Object.defineProperty(object, name, was));
}

function patch(object: Record<string, Fn>, names: readonly [readonly string[], Note][]): void {
  for (const [list, note] of names) for (const name of list) if (typeof Object.getOwnPropertyDescriptor(object, name)?.value === 'function') replace(object, name, wrap(object[name]!, note));
}

/**
 * Patches node:fs/promises or node:child_process when an evaluation asks for
 * it (load.ts's resolve hook, process.getBuiltinModule, `fs.promises`),
 * before the asker sees it.
 */
export function builtinRequested(specifier: string): void {
  if (active === 0) return;
  const name = specifier.startsWith('node:') ? specifier.slice(5) : specifier;
  const lazy = LAZY[name];
  if (lazy === undefined || lazyDone.has(name)) return;
  lazyDone.add(name);
  patch(getBuiltin(`node:${name}`) as Record<string, Fn>, lazy.names);
  syncBuiltinESMExports();
}

const getBuiltin = process.getBuiltinModule;

function install(): void {
  if (active++ > 0) return;
  replace(fsObject, 'readFileSync', readFileSyncRecorded);
  patch(fsObject, FS);
  trackFds();
  const loaded = new Set((process as unknown as { moduleLoadList?: string[] }).moduleLoadList ?? []);
  for (const [name, lazy] of Object.entries(LAZY)) if (loaded.has(lazy.loaded)) builtinRequested(name);
  process.getBuiltinModule = ((id: string) => {
    builtinRequested(id);
    return getBuiltin(id);
  }) as typeof process.getBuiltinModule;
  undo.push(() => (process.getBuiltinModule = getBuiltin));
  const promises = Object.getOwnPropertyDescriptor(fs, 'promises');
  if (promises?.get !== undefined && promises.configurable === true) {
    const get = promises.get;
    Object.defineProperty(fs, 'promises', {
      ...promises,
      get() {
        builtinRequested('fs/promises');
        return get.call(fs);
      },
    });
    undo.push(() => Object.defineProperty(fs, 'promises', promises));
  }
  syncBuiltinESMExports();
}

function uninstall(): void {
  if (--active > 0) return;
  for (const step of undo.reverse()) step();
  undo = [];
  lazyDone.clear();
  syncBuiltinESMExports();
}

/** Remembers the descriptors opened by path, so a read through one is not "outside". */
function trackFds(): void {
  const openSync = fsObject['openSync']!;
  replace(fsObject, 'openSync', function (this: unknown, ...args: unknown[]) {
    const fd = openSync.apply(this, args) as number;
    const p = pathOf(args[0]);
    if (p !== undefined) storage.getStore()?.fds.set(fd, p);
    return fd;
  });
  const open = fsObject['open']!;
  replace(fsObject, 'open', function (this: unknown, ...args: unknown[]) {
    const recorder = storage.getStore();
    const p = pathOf(args[0]);
    const callback = args.at(-1);
    if (recorder !== undefined && p !== undefined && typeof callback === 'function') {
      args[args.length - 1] = (error: unknown, fd: number) => {
        if (error === null) recorder.fds.set(fd, p);
        (callback as Fn)(error, fd);
      };
    }
    return open.apply(this, args);
  });
}

/**
 * Runs `body` (an evaluation) recording what it reads; `keep` says which paths
 * are the evaluation's own sources (not its modules, not node_modules, not the
 * state folder).
 */
export async function recordReads<T>(body: () => Promise<T>, keep: (p: string) => boolean): Promise<{ value: T; reads: EvaluationReads }> {
  const recorder = new Recorder();
  install();
  let value: T;
  try {
    value = await storage.run(recorder, body);
  } finally {
    uninstall();
  }
  return { value, reads: recorder.finish(keep) };
}
