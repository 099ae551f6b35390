// Checks how the declarations fit together and builds the TaskGraph:
// duplicate ids and outputs, references to unknown tasks and pools, cycles.
// Pure: it reads nothing from disk.

import path from 'node:path';
import type { CycleEdge, Failure } from '../error.ts';
import type { TaskId } from '../ids.ts';
import type { Declarations, DeclaredTask } from '../nodefile/builder.ts';
import type { InputSpec } from '../nodefile/types.ts';
import { err, ok, type Result } from '../util/result.ts';
import { TaskGraph, topologicalOrder, type PendingNode, type TaskNode } from './graph.ts';

interface Draft {
  readonly decl: DeclaredTask;
  /** The declared inputs, or a copy where a file input became another task's output. */
  inputs: ReadonlyMap<string, InputSpec>;
  readonly needs: TaskId[];
  readonly after: TaskId[];
  readonly outputs: string[];
  readonly cwd: string;
}

export function analyze(declarations: Declarations): Result<TaskGraph, Failure[]> {
  const failures: Failure[] = [...declarations.failures];
  const { dir } = declarations;
  const byId = new Map<TaskId, DeclaredTask>();
  const drafts: Draft[] = [];
  const producers = new Map<string, TaskId>();

  for (const decl of declarations.tasks) {
    const first = byId.get(decl.id);
    if (first !== undefined) {
      failures.push({ reason: 'duplicate-task', task: decl.id, first: first.site.get(), second: decl.site.get() });
      continue;
    }
    byId.set(decl.id, decl);
    const cwd = decl.spec.cwd === undefined ? dir : path.resolve(dir, decl.spec.cwd);
    const outputs = decl.outputs.map((o) => join(dir, o));
    for (const output of outputs) {
      const other = producers.get(output);
      if (other !== undefined) {
        failures.push({ reason: 'duplicate-output', path: output, first: other, second: decl.id, site: decl.site.get() });
      } else producers.set(output, decl.id);
    }
    drafts.push({ decl, inputs: decl.inputs, needs: [], after: [], outputs, cwd });
  }

  const folders = new Map<string, TaskId | null>();
  for (const draft of drafts) {
    const { decl } = draft;
    // Allocation matters at 50,000 tasks: the declared inputs map is kept unless an input resolved differently.
    const needs = draft.needs;
    let copy: Map<string, InputSpec> | undefined;
    for (const [name, input] of decl.inputs) {
      const resolved = resolveInput(input, dir, producers, folders);
      if (resolved !== input) (copy ??= new Map(decl.inputs)).set(name, resolved);
      if (resolved.kind !== 'task') continue;
      if (!byId.has(resolved.id)) {
        failures.push({ reason: 'unknown-task', task: decl.id, field: `inputs.${name}`, ref: resolved.id, site: decl.site.get() });
      } else if (resolved.id === decl.id) {
        failures.push({ reason: 'cycle', edges: [{ from: decl.id, to: decl.id, via: 'input', site: decl.site.get() }] });
      } else if (!needs.includes(resolved.id)) needs.push(resolved.id);
    }
    if (copy !== undefined) draft.inputs = copy;
    decl.after.forEach((ref, index) => {
      if (!byId.has(ref)) {
        failures.push({ reason: 'unknown-task', task: decl.id, field: `after[${index}]`, ref, site: decl.site.get() });
      } else if (ref === decl.id) {
        failures.push({ reason: 'cycle', edges: [{ from: decl.id, to: decl.id, via: 'after', site: decl.site.get() }] });
      } else if (!needs.includes(ref) && !draft.after.includes(ref)) draft.after.push(ref);
    });
    const pool = decl.spec.pool;
    if (pool !== undefined && !declarations.pools.has(pool)) {
      failures.push({ reason: 'unknown-pool', task: decl.id, pool, site: decl.site.get() });
    }
  }
  if (failures.length > 0) return err(failures);

  const pending: PendingNode[] = drafts.map((d) => ({ id: d.decl.id, needs: d.needs, after: d.after }));
  const order = topologicalOrder(pending);
  if (order === undefined) return err([{ reason: 'cycle', edges: findCycle(pending, byId) }]);

  const nodes: TaskNode[] = order.map((i, index) => {
    const d = drafts[i]!;
    return { id: d.decl.id, decl: d.decl, inputs: d.inputs, needs: d.needs, after: d.after, outputs: d.outputs, cwd: d.cwd, order: index };
  });
  return ok(new TaskGraph(declarations.file, dir, declarations.pools, nodes));
}

/** A file or tree input that names another task's output (or lies inside one) is a trigger edge. */
function resolveInput(input: InputSpec, dir: string, producers: ReadonlyMap<string, TaskId>, folders: Map<string, TaskId | null>): InputSpec {
  if (input.kind !== 'file' && input.kind !== 'tree') return input;
  const absolute = join(dir, input.path);
  const exact = producers.get(absolute);
  if (exact !== undefined) return { kind: 'task', id: exact, path: absolute };
  const slash = absolute.lastIndexOf('/');
  const producer = slash > 0 ? producerOfFolder(absolute.slice(0, slash), producers, folders) : null;
  return producer === null ? input : { kind: 'task', id: producer, path: absolute };
}

/** The task whose output is `folder` or one of its ancestors; remembered per folder (inputs share folders). */
function producerOfFolder(folder: string, producers: ReadonlyMap<string, TaskId>, folders: Map<string, TaskId | null>): TaskId | null {
  const known = folders.get(folder);
  if (known !== undefined) return known;
  const own = producers.get(folder);
  const slash = folder.lastIndexOf('/');
  const found = own ?? (slash > 0 ? producerOfFolder(folder.slice(0, slash), producers, folders) : null);
  folders.set(folder, found);
  return found;
}

const needsNormalising = /(^|\/)\.\.?(\/|$)|\/\/|\/$/;

/** path.resolve for the common case of a plain relative path, without its cost. */
export function join(dir: string, p: string): string {
  if (p.startsWith('/') || needsNormalising.test(p)) return path.resolve(dir, p);
  return dir === '/' ? `/${p}` : `${dir}/${p}`;
}

/** Finds one loop and lists every edge of it, upstream to downstream. */
function findCycle(nodes: readonly PendingNode[], byId: ReadonlyMap<TaskId, DeclaredTask>): CycleEdge[] {
  // Only on the error path: build the edge lists with their kinds here.
  const upstreamOf = new Map(
    nodes.map((n) => [
      n.id,
      [...n.needs.map((id) => ({ id, kind: 'input' as const })), ...n.after.map((id) => ({ id, kind: 'after' as const }))],
    ]),
  );
  const state = new Map<TaskId, 'open' | 'done'>();
  // Iterative DFS along upstream edges; the stack holds the current path.
  for (const start of nodes) {
    if (state.has(start.id)) continue;
    const stack: { id: TaskId; next: number }[] = [{ id: start.id, next: 0 }];
    state.set(start.id, 'open');
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const ups = upstreamOf.get(top.id) ?? [];
      if (top.next >= ups.length) {
        state.set(top.id, 'done');
        stack.pop();
        continue;
      }
      const edge = ups[top.next++]!;
      const seen = state.get(edge.id);
      if (seen === undefined) {
        state.set(edge.id, 'open');
        stack.push({ id: edge.id, next: 0 });
      } else if (seen === 'open') {
        // The loop is edge.id … top.id on the stack, closed by top ← edge.id.
        const from = stack.findIndex((s) => s.id === edge.id);
        const loop = stack.slice(from).map((s) => s.id);
        const edges: CycleEdge[] = [];
        for (let i = 0; i < loop.length; i++) {
          const downstream = loop[i]!;
          const upstream = loop[(i + 1) % loop.length]!;
          const kind = (upstreamOf.get(downstream) ?? []).find((u) => u.id === upstream)?.kind ?? 'input';
          edges.push({ from: upstream, to: downstream, via: kind, site: byId.get(downstream)?.site.get() });
        }
        return edges.reverse();
      }
    }
  }
  return [];
}
