// Generations: what each whole-graph apply that settled applied, kept so it
// can be applied again without the user's files. A generation is a manifest
// (`generations/<N>.json`) naming its sources — the Nodefile, the project
// modules it imports, the file inputs no task writes, the other files its
// evaluation read (src/nodefile/reads.ts) — by path and SHA-256, what the
// evaluation found where it only looked (a path absent, a folder's entries),
// and its `env` inputs, each as a keyed digest and its value sealed under the
// state's key (state/seal.ts), never in plain; the sources' content lies in
// `generations/objects/<sha256>`, one copy however many generations share it,
// and so does its list of files, cut into parts (manifest.ts, SourcePart), so
// that recording and pruning cost what changed, not what there is. A small
// file's content lies in its part: a build of many small sources stores a few
// parts, not a file each.
// `generations/current` names the generation the machine is at.
//
//   pending ──apply settled (and healthy)──▶ applied
//      └──────rolled back─────────────────▶ failed   (kept: `rollback N` applies it again)
// What a manifest holds and how sources are collected: manifest.ts.

import { closeSync, existsSync, linkSync, openSync, readSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from '../error.ts';
import { sha256FileSync } from '../hash/file.ts';
import { HASH_PREFIX } from '../ids.ts';
import { errnoWords, newerFormatMessage } from '../state/errors.ts';
import { stateKey } from '../state/key.ts';
import { unseal } from '../state/seal.ts';
import { DurableBatch, writeDurably } from '../util/durable.ts';
import { fsyncDir } from '../util/fsync.ts';
import { err, ok, type Result } from '../util/result.ts';
import { pruneStore, SWEEP_EVERY } from './prune.ts';
import { restoreSources, type Restored } from './restored.ts';
import { GENERATION_FORMAT, GENERATION_VERSION, isStoredGeneration, PART_MASK, partEnds, partKey, sealEnv, sourcesDigest, type Generation, type SealedEnv, type SourceFile, type SourcePart, type Sources, type StoredGeneration } from './manifest.ts';

const { createHash } = process.getBuiltinModule('node:crypto');

/** How many generations are kept by default (`--keep`). */
export const DEFAULT_KEEP = 10;
/** Files up to this size are copied into the store; larger ones (an OS image) are hard-linked, or named by path and SHA-256. */
export const COPY_LIMIT = 8 * 1024 * 1024;
/** Files up to this size are kept in their part (`stored: 'inline'`): a page, what an object of its own would take on disk at least. */
export const INLINE_LIMIT = 4096;
export { describeRestored, type Restored } from './restored.ts';

/** What can go wrong with a generation: the Failure variants of that name (error.ts). */
export type GenerationError = Extract<Failure, { reason: 'generation-missing' | 'generation-damaged' | 'generation-file-changed' | 'generation-write-failed' | 'generation-would-overwrite' }>;

const HEX = /^[0-9a-f]{64}$/;
const COPY = { stored: 'copy' } as const;
const LINK = { stored: 'link' } as const;
const PATH = { stored: 'path' } as const;
/** How #write begins a manifest (JSON.stringify keeps the keys' order): format, version, number, createdAt, status. */
const HEADER = new RegExp(`^\\{"format":"${GENERATION_FORMAT}","version":(\\d+),"number":(\\d+),"createdAt":"[^"]*","status":"(pending|applied|failed)"`);
const HEADER_BYTES = 256;

/** The generations of one state folder. */
export class GenerationStore {
  readonly dir: string;
  readonly #stateDir: string;
  readonly #copyLimit: number;
  readonly #inlineLimit: number;
  readonly #partMask: number;
  readonly #sweepEvery: number;
  readonly #onStep: ((step: string) => void) | undefined;

  /**
   * `partMask`: where parts are cut (manifest.ts, partEnds); smaller in tests, to make many; `sweepEvery` likewise.
   * `onStep`: for crash tests, called after each step that changes the store (a kill there is a crash there).
   */
  constructor(
    stateDir: string,
    options: { readonly copyLimit?: number; readonly inlineLimit?: number; readonly partMask?: number; readonly sweepEvery?: number; readonly onStep?: (step: string) => void } = {},
  ) {
    this.#stateDir = stateDir;
    this.dir = path.join(stateDir, 'generations');
    this.#copyLimit = options.copyLimit ?? COPY_LIMIT;
    this.#inlineLimit = options.inlineLimit ?? INLINE_LIMIT;
    this.#partMask = options.partMask ?? PART_MASK;
    this.#sweepEvery = options.sweepEvery ?? SWEEP_EVERY;
    this.#onStep = options.onStep;
  }

  #manifest(n: number): string {
    return path.join(this.dir, `${n}.json`);
  }

  object(sha256: string): string {
    return path.join(this.dir, 'objects', sha256);
  }

  /** Every generation's number, ascending. */
  numbers(): number[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names
      .map((n) => /^(\d+)\.json$/.exec(n)?.[1])
      .filter((n): n is string => n !== undefined)
      .map(Number)
      .sort((a, b) => a - b);
  }

  /** Generation `n` with its files; undefined when its manifest or one of its parts is missing, damaged or newer. */
  read(n: number): Generation | undefined {
    const stored = this.head(n);
    if (stored === undefined) return undefined;
    const { parts, ...rest } = stored;
    if (parts === undefined) return stored.files === undefined ? undefined : (rest as Generation);
    const files: SourceFile[] = [];
    for (const part of parts) {
      const entries = this.part(part);
      if (entries === undefined) return undefined;
      for (const entry of entries) files.push(entry);
    }
    return { ...rest, files };
  }

  /** Generation `n`'s manifest as stored: its parts named, not read. */
  head(n: number): StoredGeneration | undefined {
    try {
      const parsed: unknown = JSON.parse(readFileSync(this.#manifest(n), 'utf8'));
      return isStoredGeneration(parsed, n, GENERATION_VERSION) ? parsed : undefined;
    } catch {
      return undefined;
    }
  }

  /** A part's files, once its bytes are checked against the SHA-256 that names them; undefined when missing or damaged. */
  part(part: SourcePart): SourceFile[] | undefined {
    try {
      const bytes = readFileSync(this.object(part.sha256));
      if (createHash('sha256').update(bytes).digest('hex') !== part.sha256) return undefined;
      const files = JSON.parse(bytes.toString('utf8')) as SourceFile[];
      return Array.isArray(files) && files.length === part.count ? files : undefined;
    } catch {
      return undefined;
    }
  }

  /** Stores `files` (entries of one part) as an object in `batch`, unless it is there. */
  #putPart(files: readonly SourceFile[], key: string, batch: DurableBatch): SourcePart {
    const text = `${JSON.stringify(files.map((f) => ({ path: f.path, sha256: f.sha256, size: f.size, mode: f.mode, stored: f.stored, content: f.content })))}\n`;
    const sha256 = createHash('sha256').update(text).digest('hex');
    if (!batch.has(sha256) && !existsSync(this.object(sha256))) batch.add(sha256, text, 0o400);
    return { sha256, key, count: files.length };
  }

  /** `files` cut into parts and stored durably (manifest.ts, partEnds). */
  #putParts(files: readonly SourceFile[]): SourcePart[] {
    const batch = new DurableBatch(path.join(this.dir, 'objects'), this.#onStep);
    try {
      const parts: SourcePart[] = [];
      let from = 0;
      for (const to of partEnds(files, this.#partMask)) {
        parts.push(this.#putPart(files.slice(from, to), partKey(files, from, to), batch));
        from = to;
      }
      batch.commit();
      return parts;
    } finally {
      batch.discard();
    }
  }

  /**
   * A manifest's format, version and status, from its first bytes where it
   * begins as #write writes it (a manifest is megabytes at 50,000 sources);
   * parsed whole otherwise. Undefined when unreadable.
   */
  #header(n: number): { format?: unknown; version?: unknown; status?: unknown } | undefined {
    const file = this.#manifest(n);
    try {
      const fd = openSync(file, 'r');
      let head: string;
      try {
        const buffer = Buffer.alloc(HEADER_BYTES);
        head = buffer.toString('utf8', 0, readSync(fd, buffer, 0, HEADER_BYTES, 0));
      } finally {
        closeSync(fd);
      }
      const found = HEADER.exec(head);
      if (found !== null && Number(found[2]) === n) return { format: GENERATION_FORMAT, version: Number(found[1]), status: found[3] };
      return JSON.parse(readFileSync(file, 'utf8')) as { format?: unknown; version?: unknown; status?: unknown };
    } catch {
      return undefined;
    }
  }

  /** Why generation `n` cannot be read: its manifest is not there, or is there and not whole. */
  #absent(n: number): GenerationError {
    const file = this.#manifest(n);
    if (existsSync(file)) return { reason: 'generation-damaged', number: n, path: file, message: 'its manifest is not whole' };
    return { reason: 'generation-missing', number: n, known: this.numbers() };
  }

  /** The first manifest a newer nodegraph wrote, said as a newer journal is: what reads generations refuses it. */
  newer(): Extract<Failure, { reason: 'state-unreadable' }> | undefined {
    for (const n of this.numbers()) {
      const parsed = this.#header(n);
      if (parsed === undefined) continue;
      if (parsed.format === GENERATION_FORMAT && typeof parsed.version === 'number' && parsed.version > GENERATION_VERSION) {
        const file = this.#manifest(n);
        return { reason: 'state-unreadable', path: file, message: newerFormatMessage(file, 'generation', parsed.version, GENERATION_VERSION) };
      }
    }
    return undefined;
  }

  /** Every generation that reads whole, and why each damaged one does not; ascending. */
  survey(): { generations: Generation[]; damaged: Extract<GenerationError, { reason: 'generation-damaged' }>[] } {
    const generations: Generation[] = [];
    const damaged: Extract<GenerationError, { reason: 'generation-damaged' }>[] = [];
    for (const n of this.numbers()) {
      const generation = this.read(n);
      const why = generation === undefined ? this.unreadable(n) : undefined; // one pruned meanwhile is gone, not damaged
      if (generation !== undefined) generations.push(generation);
      else if (why?.reason === 'generation-damaged') damaged.push(why);
    }
    return { generations, damaged };
  }

  /** Why read(n) found nothing: a part of its list is missing or not whole, its manifest is not whole, or it is not there. */
  unreadable(n: number): GenerationError {
    const part = this.head(n)?.parts?.find((p) => this.part(p) === undefined);
    if (part !== undefined) return { reason: 'generation-damaged', number: n, path: this.object(part.sha256), message: 'this part of its list of files is missing, or not the content its SHA-256 names' };
    return this.#absent(n);
  }

  /** The generation the machine is at, if one was ever recorded. */
  current(): number | undefined {
    return this.#current()?.number;
  }

  /** The current generation's sources digest, read from `current` itself: a no-op reads no manifest. */
  currentDigest(): string | undefined {
    return this.#current()?.digest;
  }

  #current(): { number: number; digest: string | undefined } | undefined {
    try {
      const [number, digest] = readFileSync(path.join(this.dir, 'current'), 'utf8').trim().split(' ');
      const n = Number(number);
      return Number.isInteger(n) && n > 0 ? { number: n, digest } : undefined;
    } catch {
      return undefined;
    }
  }

  /** `current` holds the number, and the digest of its sources; none is current once a whole destroy took everything. */
  setCurrent(generation: Pick<Generation, 'number' | 'digest'> | undefined): Result<void, GenerationError> {
    const file = path.join(this.dir, 'current');
    try {
      if (generation !== undefined) writeDurably(file, `${generation.number} ${generation.digest}\n`);
      else if (existsSync(file)) {
        unlinkSync(file); // not rmSync: it reports a read-only file system with no errno code
        fsyncDir(this.dir);
      }
    } catch (error) {
      return err({ reason: 'generation-write-failed', path: file, message: errnoWords(error) });
    }
    return ok(undefined);
  }

  /** Removes pending manifests (called only where no transaction names one); they are newer than the current one. */
  dropPending(): void {
    const current = this.current() ?? 0;
    for (const n of this.numbers()) if (n > current && this.#header(n)?.status === 'pending') rmSync(this.#manifest(n), { force: true });
  }

  next(): number {
    return (this.numbers().at(-1) ?? 0) + 1;
  }

  /**
   * Stores the sources' content and writes generation `n`'s manifest. The
   * objects it adds (sources and parts) are written as one batch (DurableBatch),
   * durable under their names before the manifest that names them is written,
   * so a manifest never names content a kill or a power loss took. A file that
   * no longer has the hash it was observed with is an error (it changed during
   * the run): nothing is recorded.
   */
  record(
    n: number,
    sources: Sources,
    extra: { readonly status: Generation['status']; readonly ran?: readonly string[]; readonly destroyed?: readonly string[] },
  ): Result<StoredGeneration, GenerationError> {
    // A part with the same files as one of the current generation's is that part (stored already,
    // its entries unstatted); so is a file with the content it had there. Only the other parts are read.
    const current = this.current();
    const before = current === undefined ? undefined : this.head(current);
    const reuse = new Map<string, SourcePart>();
    for (const part of before?.parts ?? []) reuse.set(part.key, part);
    const ends = partEnds(sources.files, this.#partMask);
    const keys = ends.map((to, i) => partKey(sources.files, i === 0 ? 0 : ends[i - 1]!, to));
    let known: Map<string, SourceFile> | undefined;
    const knownFiles = (): Map<string, SourceFile> => {
      if (known !== undefined) return known;
      known = new Map();
      for (const file of before?.files ?? []) known.set(file.path, file);
      const wanted = new Set(keys);
      for (const part of before?.parts ?? []) if (!wanted.has(part.key)) for (const file of this.part(part) ?? []) known.set(file.path, file);
      return known;
    };
    const parts: SourcePart[] = [];
    const batch = new DurableBatch(path.join(this.dir, 'objects'), this.#onStep);
    try {
      mkdirSync(batch.dir, { recursive: true, mode: 0o700 });
      let from = 0;
      for (let i = 0; i < ends.length; from = ends[i++]!) {
        const same = reuse.get(keys[i]!);
        if (same !== undefined && same.count === ends[i]! - from && existsSync(this.object(same.sha256))) {
          parts.push(same);
          continue;
        }
        const files: SourceFile[] = [];
        for (let f = from; f < ends[i]!; f++) {
          const file = sources.files[f]!;
          const had = knownFiles().get(file.path);
          if (had !== undefined && had.sha256 === file.sha256) {
            files.push(had);
            continue;
          }
          const stat = statSync(file.path);
          files.push({ path: file.path, sha256: file.sha256, size: stat.size, mode: stat.mode & 0o7777, ...this.#store(file, stat.size, batch) });
        }
        parts.push(this.#putPart(files, keys[i]!, batch));
      }
      // Also when nothing was added: an object another run renamed into place and a kill kept from syncing its folder.
      batch.commit();
    } catch (error) {
      batch.discard();
      if ((error as { reason?: string }).reason !== undefined) return err({ ...(error as GenerationError), number: n } as GenerationError);
      return err({ reason: 'generation-write-failed', path: this.dir, message: (error as Error).message });
    }
    const generation: StoredGeneration = {
      format: GENERATION_FORMAT,
      version: GENERATION_VERSION,
      number: n,
      createdAt: new Date().toISOString(),
      status: extra.status,
      nodefile: sources.nodefile,
      parts,
      probes: sources.probes,
      env: sources.env,
      digest: sources.digest,
      ran: extra.ran ?? [],
      destroyed: extra.destroyed ?? [],
    };
    return this.#write(generation);
  }

  /** Rewrites a manifest with a new status (and, once applied, what ran). */
  mark(n: number, status: Generation['status'], what: { ran?: readonly string[]; destroyed?: readonly string[] } = {}): Result<StoredGeneration, GenerationError> {
    const generation = this.head(n);
    if (generation === undefined) return err(this.#absent(n));
    return this.#write({ ...generation, status, ...what });
  }

  #write(generation: StoredGeneration): Result<StoredGeneration, GenerationError> {
    try {
      writeDurably(this.#manifest(generation.number), `${JSON.stringify(generation)}\n`);
      this.#onStep?.('manifest written');
      return ok(generation);
    } catch (error) {
      return err({ reason: 'generation-write-failed', path: this.#manifest(generation.number), message: (error as Error).message });
    }
  }

  /** Puts one file's content in the store (in its part, or in `batch` unless it is there) and says how. */
  #store(file: { readonly path: string; readonly sha256: string }, size: number, batch: DurableBatch): Pick<SourceFile, 'stored' | 'content'> {
    const object = this.object(file.sha256);
    if (size > this.#copyLimit) {
      if (existsSync(object)) return LINK;
      try {
        linkSync(file.path, object);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EXDEV' || (error as NodeJS.ErrnoException).code === 'EPERM') return PATH;
        throw error;
      }
      return LINK;
    }
    const inline = size <= this.#inlineLimit;
    if (!inline && (batch.has(file.sha256) || existsSync(object))) return COPY;
    // The bytes hashed are the bytes stored: a file that changed since it was observed is refused.
    const bytes = readFileSync(file.path);
    if (createHash('sha256').update(bytes).digest('hex') !== file.sha256) {
      throw { reason: 'generation-file-changed', number: 0, path: file.path, sha256: file.sha256 } satisfies GenerationError;
    }
    if (inline) return { stored: 'inline', content: bytes.toString('base64') };
    batch.add(file.sha256, bytes, 0o400);
    return COPY;
  }

  /**
   * Checks that everything generation `n` needs is there with its content:
   * each stored object and inline copy by its SHA-256, each file named only by path at that
   * path with that content. Reads every byte: run before anything changes.
   */
  verify(n: number): Result<Generation, GenerationError> {
    const generation = this.read(n);
    if (generation === undefined) return err(this.unreadable(n));
    // The digest covers the Nodefile's path, every file and probe, and the env values: a manifest changed in any is refused.
    if (generation.version === GENERATION_VERSION) {
      const env = generation.env as Readonly<Record<string, SealedEnv | null>>;
      if (sourcesDigest(generation.nodefile, env, generation.files, generation.probes ?? []) !== generation.digest) {
        return err({ reason: 'generation-damaged', number: n, path: this.#manifest(n), message: 'its manifest does not match its digest' });
      }
    }
    for (const file of generation.files) {
      if (!HEX.test(file.sha256)) return err({ reason: 'generation-damaged', number: n, path: file.path, message: 'its manifest names no valid SHA-256' });
      const where = file.stored === 'path' ? file.path : this.object(file.sha256);
      let found: string;
      try {
        found = file.stored === 'inline' ? createHash('sha256').update(Buffer.from(file.content ?? '', 'base64')).digest('hex') : sha256FileSync(where).hash.slice(HASH_PREFIX);
      } catch (error) {
        if (file.stored === 'path') return err({ reason: 'generation-file-changed', number: n, path: file.path, sha256: file.sha256 });
        return err({ reason: 'generation-damaged', number: n, path: file.path, message: `its stored copy cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` });
      }
      if (found === file.sha256) continue;
      if (file.stored === 'path') return err({ reason: 'generation-file-changed', number: n, path: file.path, sha256: file.sha256 });
      return err({ reason: 'generation-damaged', number: n, path: file.path, message: `its stored copy has sha256:${found.slice(0, 12)}…, not sha256:${file.sha256.slice(0, 12)}…` });
    }
    return ok(generation);
  }

  /**
   * The env values generation `n` was applied with, opened with the state's
   * key: what a rollback sets again. A value that does not open (the key was
   * replaced, the manifest damaged) is an error, before anything changes.
   */
  env(n: number): Result<Record<string, string | null>, GenerationError> {
    const generation = this.head(n);
    if (generation === undefined) return err(this.#absent(n));
    const values: Record<string, string | null> = {};
    let key: Uint8Array | undefined;
    for (const [name, value] of Object.entries(generation.env)) {
      if (value === null || typeof value === 'string') {
        values[name] = value;
        continue;
      }
      if (key === undefined) {
        const got = stateKey(this.#stateDir, false);
        if (!got.ok) return err({ reason: 'generation-damaged', number: generation.number, path: this.#manifest(generation.number), message: `its env values cannot be opened: ${got.error.reason === 'state-unreadable' ? got.error.message : got.error.reason}` });
        key = got.value;
      }
      const opened = unseal(key, name, value.sealed);
      if (opened === undefined) {
        return err({ reason: 'generation-damaged', number: generation.number, path: this.#manifest(generation.number), message: `its value of ${name} does not open with the state key ${path.join(this.#stateDir, 'key')} (the key was replaced, or the manifest damaged)` });
      }
      values[name] = opened;
    }
    return ok(values);
  }

  /**
   * Rewrites each version 1 manifest, which held its env values in plain, as
   * version 2 with them sealed under `key` and its digest recomputed from their
   * keyed digests; then `current` names the new digest. Called by a writer
   * holding the lock. Each rewrite is atomic, and one cut short is finished by the next.
   */
  sealPlain(key: Uint8Array): Result<void, GenerationError> {
    for (const n of this.numbers()) {
      // Only a version 1 manifest is parsed whole: the rest are passed on their header.
      if (this.#header(n)?.version !== 1) continue;
      const generation = this.read(n);
      if (generation === undefined || generation.version !== 1) continue;
      const env: Record<string, SealedEnv | null> = {};
      for (const [name, value] of Object.entries(generation.env)) env[name] = typeof value === 'string' ? sealEnv(key, name, value) : value;
      const digest = sourcesDigest(generation.nodefile, env, generation.files, generation.probes ?? []);
      const { files, ...rest } = generation;
      let parts: SourcePart[];
      try {
        parts = this.#putParts(files);
      } catch (error) {
        return err({ reason: 'generation-write-failed', path: this.dir, message: (error as Error).message });
      }
      // The key order #write's header expects: parts where files were.
      const written = this.#write({ format: rest.format, version: GENERATION_VERSION, number: rest.number, createdAt: rest.createdAt, status: rest.status, nodefile: rest.nodefile, parts, probes: rest.probes ?? [], env, digest, ran: rest.ran, destroyed: rest.destroyed });
      if (!written.ok) return written;
    }
    const current = this.#current();
    const manifest = current === undefined ? undefined : this.head(current.number);
    if (manifest !== undefined && manifest.digest !== current!.digest) return this.setCurrent(manifest);
    return ok(undefined);
  }

  /** Puts generation `n`'s sources back at their paths (restored.ts, restoreSources); `checked`: verify() found it whole already. */
  restore(n: number, checked?: Generation): Result<Restored, GenerationError> {
    return restoreSources(this, n, checked);
  }

  /** Keeps the newest `keep` generations (and always `current` and `pinned`) and what they name (prune.ts). */
  prune(keep: number, pinned: readonly number[] = []): number[] {
    return pruneStore(this, keep, pinned, this.#sweepEvery, (n: number) => rmSync(this.#manifest(n), { force: true }), this.#onStep);
  }
}
