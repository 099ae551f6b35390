// Reads what the planner needs: the hash of every input, of every recorded
// output, and the verdict of every check. The I/O half of planning: one stat
// per file through the hash cache (a file many tasks read is looked at once),
// and the checks run in parallel, up to `jobs`, while the files are looked at.

import type { Failure } from '../error.ts';
import { contentHash, HASH_PREFIX, type ContentHash, type TaskId } from '../ids.ts';
import { relative } from 'node:path';
import { join } from '../util/paths.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { TaskMap } from '../graph/task-map.ts';
import type { FileObservation, HashCache } from '../hash/cache.ts';
import { hashGlob } from '../hash/glob.ts';
import { hashUnlessLarge, Unread } from '../hash/large.ts';
import { NameNotUtf8, notUtf8 } from '../hash/names.ts';
import { hashTree } from '../hash/tree.ts';
import { hashValue, keyedHash } from '../hash/value.ts';
import type { ProcessRunner } from '../process-runner.ts';
import type { Records } from '../state/records.ts';
import { PairMap, smallMap, WALK_MAX } from '../util/pairs.ts';
import { err, ok, type Result } from '../util/result.ts';
import type { ObservedSources, TaskObservation } from '../hash/observation.ts';
import { runCheck } from './check.ts';
import { observePath } from './outputs.ts';

export interface ObserveOptions {
  /**
   * The graph the nodes are of: what is observed is kept by their place in it
   * (graph/task-map.ts), and input paths are relative to its folder, as outputs
   * are (a task's `cwd` is only where it runs).
   */
  readonly graph: TaskGraph;
  readonly nodes: readonly TaskNode[];
  readonly records: Records;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly jobs: number;
  readonly signal: AbortSignal;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The state folder's key (state/key.ts), asked for once, when a task has a sensitive input. */
  readonly key: () => Result<Uint8Array, Failure>;
  /**
   * 'look': the observation is only shown (a plan not saved, a status), so a task without a
   * successful record, which is decided from that alone, has its file and tree inputs only
   * stat'ed (a missing one is reported all the same) and its observation lists none of them.
   * 'hash' (the default): every input is hashed, for an observation that is run or saved.
   */
  readonly unrecordedInputs?: 'hash' | 'look';
  /** Given what the pass read of the tasks' sources once it has looked at every task, before it is let go of. */
  readonly onSources?: (sources: ObservedSources) => void;
  /** Told once of a check still running after `afterMs` (wall clock), so that a run that waits on one says which. */
  readonly slowCheck?: { readonly afterMs: number; readonly say: (node: TaskNode) => void };
}

/** The files an observing pass stats, worked out from the graph alone. */
export interface FilesToObserve {
  readonly nodes: readonly TaskNode[];
  /**
   * Each file input once (a header a thousand tasks read is looked at once),
   * and every output, as the hash cache keys them, in the order the pass looks.
   * (Outputs are only looked at for a task with a record, which is not known yet.)
   */
  readonly paths: readonly string[];
  /** Node i's file and tree inputs (in for…in order), then its outputs, as indexes into paths: from slots[starts[i]]. */
  readonly slots: Int32Array;
  readonly starts: Int32Array;
  /** 1 at each path that some task declares a file input (not only a tree, nor an output). */
  readonly fileInputs: Uint8Array;
}

export function filesToObserve(nodes: readonly TaskNode[], dir: string): FilesToObserve {
  const paths: string[] = [];
  const inputSlots = new Map<string, number>();
  const slots: number[] = [];
  const fileSlots: number[] = [];
  const starts = new Int32Array(nodes.length);
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!;
    starts[i] = slots.length;
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      if (input.kind !== 'file' && input.kind !== 'tree') continue;
      // join() leaves a path as the hash cache keys it (absolute, normalized): its stat is the cache's.
      const absolute = join(dir, input.path);
      let slot = inputSlots.get(absolute);
      if (slot === undefined) inputSlots.set(absolute, (slot = paths.push(absolute) - 1));
      slots.push(slot);
      if (input.kind === 'file') fileSlots.push(slot);
    }
    for (const output of node.outputs) slots.push(paths.push(output) - 1);
  }
  const fileInputs = new Uint8Array(paths.length);
  for (const slot of fileSlots) fileInputs[slot] = 1;
  return { nodes, paths, slots: Int32Array.from(slots), starts, fileInputs };
}

/**
 * An observation that is its own map of input hashes: one object a task, held
 * from the plan until the task has run. A file's hash in it may be packed (see
 * pack): it is given out as a ContentHash all the same.
 */
class Observed extends PairMap<string, string> implements TaskObservation {
  readonly outputs: ReadonlyMap<string, ContentHash | 'missing'>;
  readonly unkeyed?: ReadonlyMap<string, ContentHash>;
  constructor(flat: readonly string[], outputs: ReadonlyMap<string, ContentHash | 'missing'>, unkeyed: ReadonlyMap<string, ContentHash> | undefined) {
    super(flat);
    this.outputs = outputs;
    if (unkeyed !== undefined) this.unkeyed = unkeyed;
  }

  get inputs(): ReadonlyMap<string, ContentHash> {
    return this as ReadonlyMap<string, string> as ReadonlyMap<string, ContentHash>;
  }

  override get(key: string): ContentHash | undefined {
    const value = super.get(key);
    return value === undefined ? undefined : unpack(value);
  }

  override *values(): MapIterator<ContentHash> {
    for (const value of super.values()) yield unpack(value);
  }

  override *entries(): MapIterator<[string, ContentHash]> {
    for (const [key, value] of super.entries()) yield [key, unpack(value)];
  }
}

/**
 * A file's hash as an observation of a task with no record keeps it: its 32 bytes
 * as a string of 32 one-byte characters, 48 bytes of V8's heap where `sha256:` and
 * 64 hex digits take 88. Such a task runs, and its observation is held until then.
 * Every other hash an observation holds is 71 characters long, so the length tells
 * a packed one.
 */
type Packed = string & { readonly __packed: true };
const PACKED_LENGTH = 32;
const pack = (hash: ContentHash): Packed => Buffer.from(hash.slice(HASH_PREFIX), 'hex').toString('latin1') as Packed;
const unpack = (value: string): ContentHash =>
  value.length === PACKED_LENGTH ? contentHash(Buffer.from(value, 'latin1').toString('hex')) : (value as ContentHash);

/** What an observation says of outputs it did not look at: one Map for all (a Map is about 150 bytes even empty). */
const NO_OUTPUTS: ReadonlyMap<string, never> = new Map<string, never>();
const NO_INPUTS: ReadonlyMap<string, never> = new PairMap<string, never>([]);

export async function observe(options: ObserveOptions): Promise<Result<Map<TaskId, TaskObservation>, Failure[]>> {
  const { nodes, cache } = options;
  const observations = new TaskMap<TaskObservation>(options.graph);
  const files = filesToObserve(nodes, options.graph.dir);
  // Checks and outputs only matter when there is a record they could agree with. The checks
  // (processes, most of them) start first, and run while the files are looked at below.
  const checks = startChecks(options);
  // Files the cache knows nothing of are read below, one after another: many of them, the
  // kernel is asked to read ahead first.
  let readingAhead = false;
  if (options.runner.readAhead !== undefined) {
    // Only what will be read: with unrecordedInputs 'look', a task without a record's inputs are not.
    const reads = options.unrecordedInputs === 'look' ? (node: TaskNode): boolean => options.records.status(node.id) === 'ok' : () => true;
    const unknown = unknownInputs(files, cache, reads);
    readingAhead = unknown.length >= READ_AHEAD_MIN && options.runner.readAhead(unknown);
  }
  const pass = new FilePass(options, files);
  for (let n = 0; n < nodes.length; n++) {
    // The read-ahead request and the checks' output come in on the event loop: a turn every so often.
    if ((readingAhead || checks.count > 0) && n % EVENT_LOOP_TURN === EVENT_LOOP_TURN - 1) await new Promise<void>((resolve) => setImmediate(resolve));
    // A large file is read off the main thread, so that Ctrl-C is heard and cuts the read short.
    const large = pass.look(n);
    if (large !== undefined && !(await pass.readLarge(large))) break;
    observations.set(nodes[n]!.id, pass.task(n));
  }
  await checks.done;
  // A check or a read cut short (or never started) is no verdict: what it would say is unknown.
  if (options.signal.aborted) return err([{ reason: 'interrupted', during: 'check' }]);
  if (pass.failures.length > 0) return err(pass.failures);
  for (const [id, check] of checks.verdicts) {
    const current = observations.get(id)!;
    observations.set(id, { inputs: current.inputs, outputs: current.outputs, check, ...(current.unkeyed === undefined ? {} : { unkeyed: current.unkeyed }) });
  }
  options.onSources?.(pass);
  return ok(observations);
}

type Verdict = { readonly ok: boolean; readonly detail: string };

/** What a pass keeps of a file it looked at. */
const seenOf = (looked: FileObservation): ContentHash | Exclude<FileObservation['kind'], 'file'> => (looked.kind === 'file' ? looked.hash : looked.kind);

/** What look(n) left for readLarge: the read of a large file, or of a whole (a tree, a glob, an output) that holds one. */
type Left = (signal: AbortSignal) => Promise<void>;

/** Runs the checks of the tasks with a successful record, up to `jobs` at once. */
function startChecks(options: ObserveOptions): { readonly count: number; readonly verdicts: Map<TaskId, Verdict>; readonly done: Promise<unknown> } {
  const verdicts = new Map<TaskId, Verdict>();
  const checks = options.nodes.filter((node) => node.decl.spec.check !== undefined && options.records.status(node.id) === 'ok');
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < checks.length && !options.signal.aborted) {
      const node = checks[next++]!;
      const slow = options.slowCheck;
      const waiting = slow === undefined ? undefined : setTimeout(() => slow.say(node), slow.afterMs);
      const verdict = await runCheck(node, options.runner, options.signal).finally(() => clearTimeout(waiting));
      if (verdict !== undefined) verdicts.set(node.id, verdict);
    }
  };
  return { count: checks.length, verdicts, done: Promise.all(Array.from({ length: Math.min(options.jobs, checks.length) }, worker)) };
}

/** One observing pass over the tasks' files: what it has looked at, and what went wrong. */
class FilePass implements ObservedSources {
  readonly failures: Failure[] = [];
  readonly envNames = new Set<string>();
  readonly #options: ObserveOptions;
  readonly #files: FilesToObserve;
  // One look per file in this pass (a header that is an input of a thousand tasks is
  // stat'ed once): by slot. Only here: the executor hashes outputs again after tasks write them.
  // 'looked': a file seen to be there, its content not read (unrecordedInputs 'look').
  // An output's slot (one of its own) holds the output's hash, or 'missing'.
  readonly #seen: (ContentHash | Packed | Exclude<FileObservation['kind'], 'file'> | 'looked' | undefined)[];
  // And one walk per directory: a tree several tasks read is hashed once.
  readonly #trees = new Map<string, ContentHash>();
  // Trees (inputs or outputs) that hold a name that is not UTF-8: each task that reads one fails.
  readonly #refused = new Map<string, NameNotUtf8>();
  // The node look(n) was last given: its glob inputs' hashes, by name.
  readonly #globs = new Map<string, ContentHash>();
  readonly #scratch: string[] = [];
  #key: Uint8Array | undefined;
  #keyFailed = false;

  constructor(options: ObserveOptions, files: FilesToObserve) {
    this.#options = options;
    this.#files = files;
    this.#seen = new Array(files.paths.length);
  }

  forEachFile(visit: (path: string, hash: ContentHash | undefined) => void): void {
    const { paths, fileInputs } = this.#files;
    for (let slot = 0; slot < paths.length; slot++) {
      if (fileInputs[slot] !== 1) continue;
      const path = paths[slot]!;
      const seen = this.#seen[slot];
      // A path that is a file input and also another task's tree input may be a folder: hashed as a tree.
      if (seen === 'directory') visit(path, this.#trees.get(path));
      else if (seen === undefined || seen === 'looked' || seen === 'missing' || seen === 'other') visit(path, undefined);
      else visit(path, seen.length === PACKED_LENGTH ? unpack(seen) : (seen as ContentHash));
    }
  }

  /**
   * Hashes node n's file, tree and glob inputs, and its outputs when it has a record, as task(n)
   * will read them; a file, tree, glob or output that holds a large file the cache cannot vouch
   * for is left for readLarge, and given (undefined when there is none).
   */
  look(n: number): Left[] | undefined {
    const node = this.#files.nodes[n]!;
    const { cache, records, graph } = this.#options;
    const trusted = records.status(node.id) === 'ok';
    // task(n) then only stats its file and tree inputs; its globs it hashes all the same.
    const statOnly = this.#options.unrecordedInputs === 'look' && !trusted;
    const { paths, slots, starts } = this.#files;
    let at = starts[n]!;
    let left: Left[] | undefined;
    this.#globs.clear();
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      if (input.kind === 'glob') {
        const glob = this.#named(node, `inputs.${name}`, undefined, () => hashUnlessLarge(cache, (look) => hashGlob(input.pattern, graph.dir, look).hash));
        if (glob instanceof Unread) (left ??= []).push(async (signal) => void this.#globs.set(name, await glob.read(signal)));
        else if (glob !== undefined) this.#globs.set(name, glob);
      }
      if (statOnly || (input.kind !== 'file' && input.kind !== 'tree')) continue;
      const slot = slots[at++]!;
      const path = paths[slot]!;
      let seen = this.#seen[slot];
      if (seen === undefined || seen === 'looked') {
        const looked = cache.hashFileUnlessLarge(path);
        // seen stays undefined until read: a large file is no tree to walk.
        if (looked === undefined) (left ??= []).push(async (signal) => void (this.#seen[slot] = seenOf(await cache.hashFileAsync(path, signal))));
        else this.#seen[slot] = seen = seenOf(looked);
      }
      if (input.kind === 'tree' && seen === 'directory' && !this.#trees.has(path)) {
        const tree = this.#named(node, `inputs.${name}`, path, () => hashUnlessLarge(cache, (look) => hashTree(path, look)));
        if (tree instanceof Unread) (left ??= []).push(async (signal) => void this.#trees.set(path, await tree.read(signal)));
        else if (tree !== undefined) this.#trees.set(path, tree);
      }
    }
    if (!trusted) return left;
    for (let o = 0; o < node.outputs.length; o++) {
      const output = node.outputs[o]!;
      const slot = slots[at + o]!;
      const seen = this.#named(node, 'outputs', output, () => hashUnlessLarge(cache, (look) => observePath(output, look)));
      if (seen instanceof Unread) (left ??= []).push(async (signal) => void (this.#seen[slot] = await seen.read(signal)));
      else this.#seen[slot] = seen ?? 'missing';
    }
    return left;
  }

  /** Reads what look(n) left; false when the signal cut that short. */
  async readLarge(left: readonly Left[]): Promise<boolean> {
    const { signal } = this.#options;
    for (const read of left) {
      try {
        await read(signal);
      } catch (error) {
        if (signal.aborted) return false;
        throw error;
      }
    }
    return true;
  }

  /** Node n's observation. */
  task(n: number): TaskObservation {
    const node = this.#files.nodes[n]!;
    const trusted = this.#options.records.status(node.id) === 'ok';
    const inputs = this.#scratch;
    inputs.length = 0;
    const unkeyed = this.#inputs(node, this.#files.starts[n]!, trusted, inputs);
    let outputs: ReadonlyMap<string, ContentHash | 'missing'> = NO_OUTPUTS;
    if (trusted && node.outputs.length > 0) outputs = this.#outputs(n);
    if (inputs.length === 0) return { inputs: NO_INPUTS, outputs };
    // Read from the scratch list, which it does not keep.
    if (inputs.length <= 2 * WALK_MAX) return new Observed(inputs, outputs, unkeyed);
    const map = smallMap<string, ContentHash>(inputs.map((v, i) => ((i & 1) === 1 ? unpack(v) : v)));
    return unkeyed === undefined ? { inputs: map, outputs } : { inputs: map, outputs, unkeyed };
  }

  /** Pushes name, hash… of the node's inputs (its file slots from `at`); gives its sensitive inputs' plain hashes. */
  #inputs(node: TaskNode, at: number, trusted: boolean, inputs: string[]): Map<string, ContentHash> | undefined {
    const options = this.#options;
    let unkeyed: Map<string, ContentHash> | undefined;
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      switch (input.kind) {
        case 'task':
          break;
        case 'value':
        case 'env': {
          if (input.kind === 'env') this.envNames.add(input.name);
          const value = input.kind === 'value' ? input.value : (options.env[input.name] ?? null);
          if (input.kind === 'value' && input.sensitive !== true) {
            inputs.push(name, hashValue(value));
            break;
          }
          const digest = this.#secret(value);
          if (digest === undefined) break;
          inputs.push(name, digest);
          if (trusted) (unkeyed ??= new Map()).set(name, hashValue(value));
          break;
        }
        case 'glob': {
          // look(n) hashed it, just before (or refused it: a failure).
          const glob = this.#globs.get(name);
          if (glob !== undefined) inputs.push(name, glob);
          break;
        }
        case 'file':
        case 'tree': {
          const seen = this.#file(node, name, this.#files.slots[at++]!, trusted, input.kind === 'tree');
          if (seen !== undefined) inputs.push(name, seen);
          break;
        }
      }
    }
    return unkeyed;
  }

  /**
   * A file or tree input's hash (packed for a task with no record); undefined when it is
   * missing (a failure) or was only looked at (unrecordedInputs 'look').
   */
  #file(node: TaskNode, name: string, slot: number, trusted: boolean, tree: boolean): string | undefined {
    const absolute = this.#files.paths[slot]!;
    let seen = this.#seen[slot];
    if (!trusted && this.#options.unrecordedInputs === 'look') {
      if (seen === undefined) {
        const kind = this.#options.cache.kindOf(absolute);
        this.#seen[slot] = seen = kind === 'file' ? 'looked' : kind;
      }
      if (seen === 'directory' && !tree) return this.#folder(node, name, absolute);
      return seen === 'missing' || seen === 'other' ? this.#missing(node, name, absolute) : undefined;
    }
    if (seen === undefined || seen === 'looked') {
      const looked = this.#options.cache.hashFile(absolute);
      this.#seen[slot] = seen = looked.kind === 'file' ? looked.hash : looked.kind;
    }
    if (seen === 'missing' || seen === 'other') return this.#missing(node, name, absolute);
    // A file input no task writes (one that a task writes is an upstream's output) is the user's: a folder there
    // would be hashed as a tree, which no generation can hold as a source.
    if (seen === 'directory' && !tree) return this.#folder(node, name, absolute);
    if (seen === 'directory') {
      if (this.#refused.has(absolute)) return undefined;
      let tree = this.#trees.get(absolute);
      if (tree === undefined) this.#trees.set(absolute, (tree = hashTree(absolute, this.#options.cache)));
      return tree;
    }
    // Packed for a task with no record, whose observation is held until it runs; as the
    // record has it for one with a record, whose fingerprint is computed from it now.
    if (trusted === (seen.length === PACKED_LENGTH)) this.#seen[slot] = seen = trusted ? unpack(seen) : pack(seen as ContentHash);
    return seen;
  }

  /**
   * What `hash` gives, or undefined and a failure of node's `field` when it met a name that is
   * not UTF-8 (names.ts); a tree so refused at `tree` fails every task that reads it, once each.
   */
  #named<T>(node: TaskNode, field: string, tree: string | undefined, hash: () => T): T | undefined {
    let refused = tree === undefined ? undefined : this.#refused.get(tree);
    if (refused === undefined) {
      try {
        return hash();
      } catch (error) {
        if (!(error instanceof NameNotUtf8)) throw error;
        refused = error;
        if (tree !== undefined) this.#refused.set(tree, error);
      }
    }
    const message = notUtf8(relative(this.#options.graph.dir, refused.path), field === 'outputs' ? 'make it under a UTF-8 name, or remove it' : undefined);
    this.failures.push({ reason: 'invalid-field', task: node.id, field, message, site: node.decl.site.get() });
    return undefined;
  }

  /** A folder where a file input was declared: a failure, and no hash. */
  #folder(node: TaskNode, name: string, absolute: string): undefined {
    const given = relative(this.#options.graph.dir, absolute) || '.';
    const message = `${given} is a folder: ng.file reads one file, ng.tree('${given}') a folder's files`;
    this.failures.push({ reason: 'invalid-field', task: node.id, field: `inputs.${name}`, message, site: node.decl.site.get() });
    return undefined;
  }

  /** A missing input: a failure, and no hash. */
  #missing(node: TaskNode, name: string, absolute: string): undefined {
    this.failures.push({ reason: 'missing-input', task: node.id, input: name, path: absolute, site: node.decl.site.get() });
    return undefined;
  }

  /** The outputs' hashes of node n, a task with a successful record (as look(n) found them). */
  #outputs(n: number): ReadonlyMap<string, ContentHash | 'missing'> {
    const node = this.#files.nodes[n]!;
    const { slots, starts } = this.#files;
    const first = (n + 1 < starts.length ? starts[n + 1]! : slots.length) - node.outputs.length;
    const seen = new Array<string>(node.outputs.length * 2);
    // Declared outputs are each a different path (analysis refuses one declared twice).
    for (let o = 0; o < node.outputs.length; o++) {
      seen[2 * o] = node.outputs[o]!;
      seen[2 * o + 1] = this.#seen[slots[first + o]!] as ContentHash | 'missing';
    }
    return smallMap<string, ContentHash | 'missing'>(seen);
  }

  /** A sensitive input's digest under the state's key; undefined when the key cannot be had (a failure, once). */
  #secret(value: unknown): ContentHash | undefined {
    if (this.#key === undefined && !this.#keyFailed) {
      const got = this.#options.key();
      if (got.ok) this.#key = got.value;
      else {
        this.#keyFailed = true;
        this.failures.push(got.error);
      }
    }
    return this.#key === undefined ? undefined : keyedHash(this.#key, value);
  }
}

/** Fewer files than this to read are not worth asking the kernel to read ahead. */
export const READ_AHEAD_MIN = 256;
/** Tasks observed between two turns of the event loop while a read-ahead request goes out or checks run. */
const EVENT_LOOP_TURN = 256;

/** The file inputs of the tasks `reads` that the cache holds no entry for, each once, in the order observe looks at them. */
function unknownInputs(files: FilesToObserve, cache: HashCache, reads: (node: TaskNode) => boolean): string[] {
  const { nodes, paths, slots, starts } = files;
  const listed = new Uint8Array(paths.length);
  const unknown: string[] = [];
  for (let n = 0; n < nodes.length; n++) {
    const node = nodes[n]!;
    if (!reads(node)) continue;
    let at = starts[n]!;
    for (const name in node.inputs) {
      const kind = node.inputs[name]!.kind;
      if (kind !== 'file' && kind !== 'tree') continue;
      const slot = slots[at++]!;
      if (kind === 'file' && listed[slot] === 0 && !cache.has(paths[slot]!)) {
        listed[slot] = 1;
        unknown.push(paths[slot]!);
      }
    }
  }
  return unknown;
}
