// A run planned from the seal: what lets a one-edit apply load only what the
// edit reaches.
//
// A seal (seal.ts) says that, for these declarations, this journal and these
// files, every task is unchanged. When the declarations and the journal are
// as sealed and only a few files are not, the tasks that can be anything but
// unchanged are those that read or write one of those files, and those
// downstream of them: the rest are as the seal found them. So the seal also
// keeps the graph's shape as analysis made it — per task (in plan order) its
// declaration, the seal's path of each of its file inputs (or the task that
// writes it), of each of its outputs, its upstream tasks, and where its
// record lies in the journal — and such a run builds the nodes of those tasks
// and of their direct upstream only, reads only their records (each line's
// checksum checked), and observes, plans and runs them as a whole run would
// (the same observe, makePlan and execute): with the upstream tasks settled at
// their recorded output hashes, as a whole run settles an unchanged task. At
// 50,000 tasks, one changed leaf reads 3 tasks' records and the output hashes
// of their 600 upstream tasks, not 46 MB of journal, 11 MB of hash cache and
// the whole graph.
//
// Anything the shape cannot answer — a record the seal does not point at, a
// line that is not the task's, too many tasks reached — and the run goes the
// whole way. The shape is written by the same engine that reads it (its
// files are in the seal's digest) and covered by the seal's checksum.
//
// FORMAT (little-endian, after the seal's per-path stats; T tasks):
//   float64 recordOffset[T]
//   int32 declaration[T], recordLength[T]
//   int32 fileStart[T+1], outStart[T+1], needStart[T+1], afterStart[T+1]
//   int32 files[…]  per file or tree input as declared (in for…in order):
//                   the seal's path, or −(position of the task writing it + 1)
//   int32 outs[…]   the seal's path of each output
//   int32 needs[…], after[…]   task positions

import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import type { TaskId } from '../ids.ts';
import { join, Node } from '../graph/analyze.ts';
import { TaskGraph, type TaskNode } from '../graph/graph.ts';
import type { Declarations, DeclaredTask } from '../nodefile/builder.ts';
import type { InputSpec } from '../nodefile/types.ts';
import type { FilesToObserve } from '../plan/observe.ts';
import type { UpstreamState } from '../plan/decide.ts';
import { journalPath, outputHashOf, recordLines, recordTextAt, type RecordLine } from './journal.ts';
import { parseRecord, RecordMap } from './records.ts';

/** The shape of a sealed graph, as delta runs read it (see FORMAT), given the journal's bytes; undefined when a task's record cannot be pointed at. */
export function encodeShape(declarations: Declarations, graph: TaskGraph, files: FilesToObserve, journal: Buffer): Buffer | undefined {
  const nodes = graph.ordered;
  const count = nodes.length;
  const lines = recordLines(journal);
  const position = new Map<TaskId, number>();
  for (let i = 0; i < count; i++) position.set(nodes[i]!.id, i);
  const declared = new Map<DeclaredTask, number>();
  for (let i = 0; i < declarations.tasks.length; i++) declared.set(declarations.tasks[i]!, i);

  const offsets = new Float64Array(count);
  const heads = new Int32Array(2 * count + 4 * (count + 1));
  const decl = heads.subarray(0, count);
  const lengths = heads.subarray(count, 2 * count);
  const fileStart = heads.subarray(2 * count, 3 * count + 1);
  const outStart = heads.subarray(3 * count + 1, 4 * count + 2);
  const needStart = heads.subarray(4 * count + 2, 5 * count + 3);
  const afterStart = heads.subarray(5 * count + 3, 6 * count + 4);
  const fileRefs: number[] = [];
  const outs: number[] = [];
  const needs: number[] = [];
  const after: number[] = [];
  for (let i = 0; i < count; i++) {
    const node = nodes[i]!;
    const line = lines.get(node.id);
    const index = declared.get(node.decl);
    if (line === undefined || index === undefined) return undefined;
    offsets[i] = line.offset;
    lengths[i] = line.length;
    decl[i] = index;
    fileStart[i] = fileRefs.length;
    outStart[i] = outs.length;
    needStart[i] = needs.length;
    afterStart[i] = after.length;
    // observe.ts's slots for this node: its unproduced file inputs, then its outputs.
    let at = files.starts[i]!;
    for (const name in node.decl.inputs) {
      const kind = node.decl.inputs[name]!.kind;
      if (kind !== 'file' && kind !== 'tree') continue;
      const now = node.inputs[name]!;
      if (now.kind === 'task') fileRefs.push(-(position.get(now.id)! + 1));
      else fileRefs.push(files.slots[at++]!);
    }
    for (let o = 0; o < node.outputs.length; o++) outs.push(files.slots[at++]!);
    for (const id of node.needs) needs.push(position.get(id)!);
    for (const id of node.after) after.push(position.get(id)!);
  }
  fileStart[count] = fileRefs.length;
  outStart[count] = outs.length;
  needStart[count] = needs.length;
  afterStart[count] = after.length;
  const tail = Int32Array.from([...fileRefs, ...outs, ...needs, ...after]);
  return Buffer.concat([bytesOf(offsets), bytesOf(heads), bytesOf(tail)]);
}

/** Points the shape (of `count` tasks) at task `position`'s record, where a run appended it; returns the byte ranges it changed. */
export function pointAt(shape: Buffer, count: number, position: number, line: RecordLine): [number, number][] {
  const lengthAt = 8 * count + 4 * (count + position);
  shape.writeDoubleLE(line.offset, 8 * position);
  shape.writeInt32LE(line.length, lengthAt);
  return [
    [8 * position, 8],
    [lengthAt, 4],
  ];
}

const bytesOf = (a: Float64Array | Int32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** The shape read back (copied out of the seal, so each array is aligned). */
class Shape {
  readonly count: number;
  readonly offsets: Float64Array;
  readonly decl: Int32Array;
  readonly lengths: Int32Array;
  readonly fileStart: Int32Array;
  readonly outStart: Int32Array;
  readonly needStart: Int32Array;
  readonly afterStart: Int32Array;
  readonly files: Int32Array;
  readonly outs: Int32Array;
  readonly needs: Int32Array;
  readonly after: Int32Array;

  constructor(bytes: Buffer, count: number) {
    this.count = count;
    const copy = new Uint8Array(bytes).buffer;
    this.offsets = new Float64Array(copy, 0, count);
    const heads = new Int32Array(copy, 8 * count, 6 * count + 4);
    this.decl = heads.subarray(0, count);
    this.lengths = heads.subarray(count, 2 * count);
    this.fileStart = heads.subarray(2 * count, 3 * count + 1);
    this.outStart = heads.subarray(3 * count + 1, 4 * count + 2);
    this.needStart = heads.subarray(4 * count + 2, 5 * count + 3);
    this.afterStart = heads.subarray(5 * count + 3, 6 * count + 4);
    const tail = new Int32Array(copy, 8 * count + 4 * (6 * count + 4));
    let at = 0;
    const take = (n: number): Int32Array => tail.subarray(at, (at += n));
    this.files = take(this.fileStart[count]!);
    this.outs = take(this.outStart[count]!);
    this.needs = take(this.needStart[count]!);
    this.after = take(this.afterStart[count]!);
  }

  static read(bytes: Buffer, count: number): Shape | undefined {
    const fixed = 8 * count + 4 * (6 * count + 4);
    if (bytes.length < fixed || (bytes.length - fixed) % 4 !== 0) return undefined;
    const shape = new Shape(bytes, count);
    const total = shape.files.length + shape.outs.length + shape.needs.length + shape.after.length;
    return total * 4 === bytes.length - fixed ? shape : undefined;
  }
}

/** What a delta run works on: the tasks the changed files reach, and what they need. */
export interface Delta {
  /** The reached tasks and their direct upstream, in plan order. */
  readonly graph: TaskGraph;
  /** The reached tasks, in plan order: what is observed, planned and run. */
  readonly nodes: readonly TaskNode[];
  /** Their records, read from the journal (their upstream's are known by `settled`). */
  readonly records: RecordMap;
  /** The upstream tasks that are not reached, settled at their recorded output hashes. */
  readonly settled: ReadonlyMap<TaskId, UpstreamState>;
  /** Each reached task's paths (inputs, then outputs), as the seal's path numbers: what a later seal updates. */
  readonly slots: readonly number[];
}

/**
 * Past this many tasks reached (or a quarter of the graph) a run goes the whole
 * way: it is built for big graphs (a header of a thousand leaves is 1,011 of 50,501).
 */
const MAX_REACHED = 20_000;

/**
 * The delta run for `changed` (seal path numbers whose file is not as sealed),
 * or undefined when the shape cannot answer (see the top of this file).
 */
export function openDelta(options: {
  readonly stateDir: string;
  readonly declarations: Declarations;
  readonly shape: Buffer;
  readonly ids: readonly TaskId[];
  readonly paths: (slot: number) => string;
  readonly pathCount: number;
  readonly changed: readonly number[];
}): Delta | undefined {
  const { ids, declarations } = options;
  const count = ids.length;
  const shape = Shape.read(options.shape, count);
  if (shape === undefined) return undefined;
  const changed = new Uint8Array(options.pathCount);
  for (const slot of options.changed) changed[slot] = 1;

  // Reached: a task that reads or writes a changed file, then (plan order is upstream first) anything that needs a reached task.
  const reached = new Uint8Array(count);
  let many = 0;
  for (let t = 0; t < count; t++) {
    let hit = false;
    for (let k = shape.fileStart[t]!; k < shape.fileStart[t + 1]! && !hit; k++) {
      const ref = shape.files[k]!;
      hit = ref >= 0 && changed[ref] === 1;
    }
    for (let k = shape.outStart[t]!; k < shape.outStart[t + 1]! && !hit; k++) hit = changed[shape.outs[k]!] === 1;
    for (let k = shape.needStart[t]!; k < shape.needStart[t + 1]! && !hit; k++) hit = reached[shape.needs[k]!] === 1;
    if (hit) {
      reached[t] = 1;
      if (++many > Math.max(64, Math.min(MAX_REACHED, count >> 2))) return undefined;
    }
  }
  // And their direct upstream, settled as they are.
  const wanted = new Uint8Array(count);
  for (let t = 0; t < count; t++) {
    if (reached[t] !== 1) continue;
    wanted[t] = 1;
    for (let k = shape.needStart[t]!; k < shape.needStart[t + 1]!; k++) wanted[shape.needs[k]!] = 1;
    for (let k = shape.afterStart[t]!; k < shape.afterStart[t + 1]!; k++) wanted[shape.after[k]!] = 1;
  }

  const dir = declarations.dir;
  const nodes: TaskNode[] = [];
  const all: TaskNode[] = [];
  const records = new RecordMap();
  const settled = new Map<TaskId, UpstreamState>();
  const slots: number[] = [];
  let journal: number;
  try {
    journal = openSync(journalPath(options.stateDir), 'r');
  } catch {
    // Gone since the seal was checked (a plan does not hold the lock): the whole way says what happened.
    return undefined;
  }
  try {
    for (let t = 0; t < count; t++) {
      if (wanted[t] !== 1) continue;
      const decl = declarations.tasks[shape.decl[t]!];
      if (decl === undefined || decl.id !== ids[t]) return undefined;
      const text = recordTextAt(journal, shape.offsets[t]!, shape.lengths[t]!, decl.id);
      if (text === undefined) return undefined;
      all.push(nodeOf(decl, t, shape, ids, options.paths, dir));
      if (reached[t] === 1) {
        // What is planned and run is decoded and checked, as a load checks it.
        const record = parseRecord(text);
        if (record?.status !== 'ok') return undefined;
        records.set(decl.id, record);
        nodes.push(all[all.length - 1]!);
        for (let k = shape.fileStart[t]!; k < shape.fileStart[t + 1]!; k++) if (shape.files[k]! >= 0) slots.push(shape.files[k]!);
        for (let k = shape.outStart[t]!; k < shape.outStart[t + 1]!; k++) slots.push(shape.outs[k]!);
      } else {
        // Of an upstream task, its output hash: what a whole run learns of a task it settles unchanged.
        const outputHash = outputHashOf(text);
        if (outputHash === undefined) return undefined;
        settled.set(decl.id, { settled: true, outputHash, ran: false });
      }
    }
  } finally {
    closeSync(journal);
  }
  return { graph: new TaskGraph(declarations.file, dir, declarations.pools, all), nodes, records, settled, slots };
}

/** The node analysis made of task `t`, from its declaration and the shape. */
function nodeOf(decl: DeclaredTask, t: number, shape: Shape, ids: readonly TaskId[], paths: (slot: number) => string, dir: string): Node {
  // A file input another task writes is a `task` input, as analysis made it.
  let inputs: Record<string, InputSpec> | undefined;
  let k = shape.fileStart[t]!;
  for (const name in decl.inputs) {
    const input = decl.inputs[name]!;
    if (input.kind !== 'file' && input.kind !== 'tree') continue;
    const ref = shape.files[k++]!;
    if (ref < 0) (inputs ??= { ...decl.inputs })[name] = { kind: 'task', id: ids[-ref - 1]!, path: join(dir, input.path) };
  }
  const list = (flat: Int32Array, start: Int32Array): TaskId[] => {
    const out: TaskId[] = [];
    for (let j = start[t]!; j < start[t + 1]!; j++) out.push(ids[flat[j]!]!);
    return out;
  };
  const outputs: string[] = [];
  for (let j = shape.outStart[t]!; j < shape.outStart[t + 1]!; j++) outputs.push(paths(shape.outs[j]!));
  const node = new Node(decl, shape.decl[t]!, outputs, decl.spec.cwd === undefined ? dir : path.resolve(dir, decl.spec.cwd));
  if (inputs !== undefined) node.inputs = inputs;
  node.needs = list(shape.needs, shape.needStart);
  node.after = list(shape.after, shape.afterStart);
  node.order = t;
  return node;
}
