// What a generation is made of: its manifest's shape, the sources of a graph
// (the Nodefile, its modules, its file inputs, what its evaluation read, its
// env inputs sealed under the state's key) and their one digest, and what
// changed from one generation to the next. Storing them: generations.ts.

import path from 'node:path';
import type { TaskGraph } from '../graph/graph.ts';
import { writtenBy } from '../graph/written.ts';
import type { ObservedSources } from '../hash/observation.ts';
import { sha256FileSync } from '../hash/file.ts';
import { keyedHash } from '../hash/value.ts';
import { HASH_PREFIX, type ContentHash, type TaskId } from '../ids.ts';
import { seal } from '../state/seal.ts';
import { join } from '../util/paths.ts';
import { isStrings } from '../util/guards.ts';

const { createHash } = process.getBuiltinModule('node:crypto');

export const GENERATION_FORMAT = 'nodegraph-generation';
/**
 * The manifest format version, stored as `version`: a newer one is refused
 * (GenerationStore.newer), not read. Version 1 held env values in plain; 2 seals them;
 * 3 names its files by parts (SourcePart) instead of listing them; 4 keeps small files'
 * content in their part (`stored: 'inline'`).
 */
export const GENERATION_VERSION = 4;

export interface SourceFile {
  /** Absolute. */
  readonly path: string;
  /** Hex SHA-256 of the content. */
  readonly sha256: string;
  readonly size: number;
  readonly mode: number;
  /** 'copy' and 'link' have their content in the store as an object of its own, 'inline' in its part; 'path' only names it. */
  readonly stored: 'copy' | 'link' | 'path' | 'inline';
  /** For 'inline': the content, base64. */
  readonly content?: string;
}

/** A file whose content is an object of the store's own (`objects/<sha256>`). */
export const inObject = (file: Pick<SourceFile, 'stored'>): boolean => file.stored === 'copy' || file.stored === 'link';

export interface Generation {
  readonly format: typeof GENERATION_FORMAT;
  readonly version: 1 | 2 | 3 | typeof GENERATION_VERSION;
  readonly number: number;
  readonly createdAt: string;
  readonly status: 'pending' | 'applied' | 'failed';
  /** The Nodefile, absolute. */
  readonly nodefile: string;
  /** The Nodefile first, then its modules, then file inputs, then the other files its evaluation read. */
  readonly files: readonly SourceFile[];
  /** What the evaluation found where it looked without reading (absent in manifests older than these). */
  readonly probes?: readonly SourceProbe[];
  /** `env` inputs: name → its sealed value (null when unset); a plain string in a version 1 manifest. */
  readonly env: Readonly<Record<string, SealedEnv | string | null>>;
  /** Of the Nodefile, the files (path and content), the probes and env values: equal sources, equal digest. */
  readonly digest: string;
  /** Tasks that ran in the apply that made it. */
  readonly ran: readonly string[];
  readonly destroyed: readonly string[];
}

/**
 * A run of a generation's files stored as one object (`objects/<sha256>`, the JSON
 * array of their SourceFile entries, small files' content inline), so generations that share most files share
 * most parts: recording one after a small change writes and reads only the parts it
 * changed, and pruning looks only into the parts no kept generation names.
 */
export interface SourcePart {
  /** Hex SHA-256 of the part object's bytes. */
  readonly sha256: string;
  /** Hex SHA-256 of its files' paths and contents (partKey): equal keys, the same files. */
  readonly key: string;
  readonly count: number;
}

/** A manifest as it lies on disk: version 3 names its files by parts, older versions list them. */
export type StoredGeneration = Omit<Generation, 'files'> & { readonly files?: readonly SourceFile[]; readonly parts?: readonly SourcePart[] };

const HEX64 = /^[0-9a-f]{64}$/;
const STATUSES = new Set(['pending', 'applied', 'failed']);

/**
 * Whether `v` is a whole manifest of generation `n`: every field a rollback or a
 * listing reads, of its type (a manifest damaged in one field is refused, not
 * half acted on). The digest is required from the current version on.
 */
export function isStoredGeneration(v: unknown, n: number, current: number): v is StoredGeneration {
  if (typeof v !== 'object' || v === null) return false;
  const g = v as Partial<Record<keyof StoredGeneration, unknown>>;
  if (g.format !== GENERATION_FORMAT || typeof g.version !== 'number' || g.version > current || g.number !== n) return false;
  if (typeof g.createdAt !== 'string' || !STATUSES.has(g.status as string) || typeof g.nodefile !== 'string' || !path.isAbsolute(g.nodefile)) return false;
  if (!isStrings(g.ran) || !isStrings(g.destroyed) || (g.probes !== undefined && !Array.isArray(g.probes))) return false;
  if (typeof g.env !== 'object' || g.env === null || Array.isArray(g.env)) return false;
  for (const value of Object.values(g.env)) {
    if (value !== null && typeof value !== 'string' && (typeof value !== 'object' || typeof (value as SealedEnv).digest !== 'string' || typeof (value as SealedEnv).sealed !== 'string')) return false;
  }
  if (g.version >= current ? typeof g.digest !== 'string' || !HEX64.test(g.digest) : g.digest !== undefined && typeof g.digest !== 'string') return false;
  if (g.parts !== undefined) {
    return Array.isArray(g.parts) && g.parts.every((p: Partial<SourcePart>) => typeof p === 'object' && p !== null && HEX64.test(String(p.sha256)) && typeof p.key === 'string' && Number.isSafeInteger(p.count));
  }
  return Array.isArray(g.files) && g.files.every((f: Partial<SourceFile>) => typeof f === 'object' && f !== null && typeof f.path === 'string' && typeof f.sha256 === 'string');
}

/** A part ends after a path whose hash has these low bits all zero (about 1,024 files a part on average)… */
export const PART_MASK = 1023;
/** …or at this many files. */
const PART_MAX = 4096;

/**
 * Where `files` is cut into parts (each part's end, exclusive). The cuts depend on
 * paths alone (FNV-1a), not on positions, so a file added or removed moves no cut but
 * its neighbours', and a content change none.
 */
export function partEnds(files: readonly { readonly path: string }[], mask = PART_MASK): number[] {
  const ends: number[] = [];
  let start = 0;
  for (let i = 0; i < files.length; i++) {
    const p = files[i]!.path;
    let h = 0x811c9dc5;
    for (let c = 0; c < p.length; c++) h = Math.imul(h ^ p.charCodeAt(c), 0x01000193);
    if ((h & mask) === 0 || i + 1 - start === PART_MAX) ends.push((start = i + 1));
  }
  if (start < files.length) ends.push(files.length);
  return ends;
}

/** What a part is matched by: its files' paths and contents, in order. */
export function partKey(files: readonly { readonly path: string; readonly sha256: string }[], from: number, to: number): string {
  const digest = createHash('sha256');
  for (let i = from; i < to; i++) digest.update(`${files[i]!.path}\0${files[i]!.sha256}\n`);
  return digest.digest('hex');
}

/** An env input's value at rest: its HMAC under the state's key (what is compared) and the value sealed (what is set again). */
export interface SealedEnv {
  readonly digest: ContentHash;
  readonly sealed: string;
}

/**
 * A path the evaluation probed (exists, stat) or listed (readdir) without
 * reading it: the kind it found, and a folder's entries when it listed them.
 */
export interface SourceProbe {
  readonly path: string;
  readonly kind: 'absent' | 'file' | 'dir' | 'other';
  readonly entries?: readonly string[];
}

/** What the Nodefile's evaluation read besides its modules (src/nodefile/reads.ts gives it). */
export interface EvaluationSources {
  /** Absolute path → hex SHA-256 of the content read. */
  readonly files: ReadonlyMap<string, string>;
  readonly probes: readonly SourceProbe[];
}

const NOTHING_READ: EvaluationSources = { files: new Map(), probes: [] };

/** What a graph is made of, before it is stored. */
export interface Sources {
  readonly nodefile: string;
  readonly files: readonly { readonly path: string; readonly sha256: string }[];
  readonly probes: readonly SourceProbe[];
  readonly env: Readonly<Record<string, SealedEnv | null>>;
  readonly digest: string;
}

/** A graph's sources but its env values: what observing hands on (sourceFiles), before it is sealed (sealSources). */
export interface SourceFiles {
  readonly files: readonly { readonly path: string; readonly sha256: string }[];
  readonly probes: readonly SourceProbe[];
  /** The env inputs' names, sorted. */
  readonly envNames: readonly string[];
}

/**
 * The files of `graph`'s sources: the Nodefile and `modules` (hashed here), each
 * file input (as observing saw it), and what the evaluation `read` — except what
 * the graph's tasks write: an output read at load is the tasks' to make again, not
 * a source to put back. Called while observing, so that what observing looked at
 * is let go of before the tasks run.
 */
export function sourceFiles(
  graph: TaskGraph,
  modules: readonly string[],
  observed: ObservedSources,
  read: EvaluationSources = NOTHING_READ,
  evaluated: (file: string) => string | undefined = () => undefined,
): SourceFiles {
  const list: { path: string; sha256: string }[] = [];
  const nodefile = new Set([graph.file, ...modules]);
  // As evaluated: a file edited since is refused when stored (its content no longer has this hash).
  for (const file of nodefile) list.push({ path: file, sha256: evaluated(file) ?? sha256FileSync(file).hash.slice(HASH_PREFIX) });
  // Each file input once, as observing saw it (it has no hash only where observing did not read it).
  observed.forEachFile((file, hash) => {
    if (!nodefile.has(file)) list.push({ path: file, sha256: (hash ?? sha256FileSync(file).hash).slice(HASH_PREFIX) });
  });
  const probes: SourceProbe[] = [];
  if (read.files.size + read.probes.length > 0) {
    const listed = new Set(list.map((f) => f.path));
    const written = writtenBy(graph);
    // By path: reads made concurrently (readFile) come in any order, and the digest must not.
    for (const p of [...read.files.keys()].sort()) {
      if (listed.has(p) || written.covers(p)) continue;
      list.push({ path: p, sha256: read.files.get(p)! });
      listed.add(p);
    }
    for (const probe of read.probes) {
      if (listed.has(probe.path) || written.covers(probe.path)) continue;
      probes.push(probe.entries === undefined ? probe : { ...probe, entries: probe.entries.filter((e) => !written.touches(join(probe.path, e))) });
    }
  }
  return { files: list, probes, envNames: [...observed.envNames].sort() };
}

/** The sources of the graph of `nodefile`: its `files`, and each env input's value sealed under `key` (the state's). */
export function sealSources(nodefile: string, files: SourceFiles, env: Readonly<Record<string, string | undefined>>, key: Uint8Array): Sources {
  const values: Record<string, SealedEnv | null> = {};
  for (const name of files.envNames) values[name] = sealEnv(key, name, env[name]);
  return { nodefile, files: files.files, probes: files.probes, env: values, digest: sourcesDigest(nodefile, values, files.files, files.probes) };
}

export function sealEnv(key: Uint8Array, name: string, value: string | null | undefined): SealedEnv | null {
  return value === undefined || value === null ? null : { digest: keyedHash(key, value), sealed: seal(key, name, value) };
}

/**
 * One streamed digest of every path and content, and of the env values by
 * their keyed digests (a plain SHA-256 of them would test a guess offline): a
 * no-op compares it with the current generation's.
 */
export function sourcesDigest(
  nodefile: string,
  env: Readonly<Record<string, SealedEnv | null>>,
  files: readonly { readonly path: string; readonly sha256: string }[],
  probes: readonly SourceProbe[],
): string {
  const digests = Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value?.digest ?? null]));
  const digest = createHash('sha256').update(`${nodefile}\n${JSON.stringify(digests)}\n`);
  // In chunks: an update a file is a call into the hash a file.
  let chunk = '';
  for (const file of files) {
    chunk += `${file.path}\0${file.sha256}\n`;
    if (chunk.length >= 1 << 16) {
      digest.update(chunk);
      chunk = '';
    }
  }
  digest.update(chunk);
  for (const probe of probes) digest.update(`?${probe.path}\0${probe.kind}\0${probe.entries?.join('\0') ?? ''}\n`);
  return digest.digest('hex');
}


/** What changed from generation `before` to `after`: files (relative to the Nodefile's folder) and env names. */
export function generationChanges(before: Generation | undefined, after: Generation): { files: string[]; env: string[] } {
  const dir = path.dirname(after.nodefile);
  const rel = (p: string): string => path.relative(dir, p) || p;
  if (before === undefined) return { files: after.files.map((f) => rel(f.path)), env: Object.keys(after.env) };
  const old = new Map(before.files.map((f) => [f.path, f.sha256]));
  const files: string[] = [];
  for (const f of after.files) if (old.get(f.path) !== f.sha256) files.push(rel(f.path));
  const now = new Set(after.files.map((f) => f.path));
  for (const f of before.files) if (!now.has(f.path)) files.push(`${rel(f.path)} (gone)`);
  const looked = new Map((before.probes ?? []).map((p) => [p.path, probeText(p)]));
  // A file read before and absent now is said once, by "(gone)" above.
  for (const p of after.probes ?? []) if (looked.get(p.path) !== probeText(p) && !old.has(p.path)) files.push(`${rel(p.path)} (${p.kind === 'absent' ? 'absent' : p.entries !== undefined ? 'listed' : p.kind})`);
  const env = [...new Set([...Object.keys(before.env), ...Object.keys(after.env)])].filter((k) => envText(before.env[k]) !== envText(after.env[k]));
  return { files, env };
}

/** What an env value is compared by: its keyed digest (a version 1 manifest's: its plain value). */
const envText = (value: SealedEnv | string | null | undefined): string | undefined =>
  value === undefined ? undefined : value === null ? 'unset' : typeof value === 'string' ? `plain:${value}` : value.digest;

const probeText = (p: SourceProbe): string => `${p.kind}:${p.entries?.join('/') ?? ''}`;
