// The direction of imports (shared/DESIGN.md "A layout for the one path"):
// each module of src/ and graphs/ sits in a layer and imports only its own
// folder or a lower layer; type imports count too, since a loop through types
// is still a loop for a reader. `node scripts/check-imports.ts` prints every
// violation; test/unit/imports.test.ts keeps the list empty.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

interface Layer {
  readonly name: string;
  /** Higher imports lower; two layers of the same rank do not import each other. */
  readonly rank: number;
  /** Folders end in '/'; anything else is one file. */
  readonly members: readonly string[];
}

export const LAYERS: readonly Layer[] = [
  // The kernel: ids, failures, the shared types, results and the other small helpers.
  { name: 'kernel', rank: 0, members: ['src/ids.ts', 'src/error.ts', 'src/types.ts', 'src/process-runner.ts', 'src/util/'] },
  { name: 'nodefile', rank: 1, members: ['src/nodefile/'] },
  { name: 'hash', rank: 2, members: ['src/hash/'] },
  { name: 'node', rank: 2, members: ['src/node/'] },
  { name: 'state', rank: 3, members: ['src/state/'] },
  { name: 'graph', rank: 3, members: ['src/graph/'] },
  { name: 'plan', rank: 4, members: ['src/plan/'] },
  { name: 'observe', rank: 5, members: ['src/observe/'] },
  // Events carry the plan, so they sit above it.
  { name: 'events', rank: 6, members: ['src/events.ts'] },
  { name: 'execute', rank: 7, members: ['src/execute/'] },
  { name: 'transaction', rank: 7, members: ['src/transaction/'] },
  // One run over one session: load, observe, plan, execute, record.
  { name: 'run', rank: 8, members: ['src/engine.ts', 'src/apply.ts', 'src/operations.ts'] },
  { name: 'report', rank: 8, members: ['src/report/'] },
  { name: 'watch', rank: 8, members: ['src/watch/'] },
  { name: 'cli', rank: 9, members: ['src/cli/'] },
  { name: 'api', rank: 10, members: ['src/index.ts', 'src/library.ts'] },
  { name: 'graphs', rank: 11, members: ['graphs/'] },
];

/**
 * Engine layers take only types from nodefile/: the Nodefile API is the user's side.
 * The record, the hashes and the planner take nothing from it: they read the graph.
 */
const TYPES_ONLY_FROM_NODEFILE = new Set(['graph', 'observe', 'execute', 'transaction']);
const NOTHING_FROM_NODEFILE = new Set(['hash', 'state', 'plan']);

/**
 * Violations that work under way elsewhere removes, each as `from -> to` or as
 * its loop line; `node scripts/check-imports.ts` names those no longer found.
 */
export const KNOWN: readonly string[] = [];

export interface Edge {
  readonly from: string;
  readonly to: string;
  readonly typeOnly: boolean;
}

export function layerOf(file: string): Layer | undefined {
  return LAYERS.find((l) => l.members.some((m) => (m.endsWith('/') ? file.startsWith(m) : file === m)));
}

// `import … from './x'`, `export … from './x'`, `import './x'`, `import('./x')`.
const STATIC = /(?:^|[\n;])\s*(import|export)\s+(type\s+)?(?:[^;'"]*?\s+from\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;
const DYNAMIC = /\bimport\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)(\.)?/g;

/** Drops comments, so an import quoted in one is not taken for one. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/** The relative imports of each file, resolved against the root (paths with '/'). */
export function edgesOf(sources: ReadonlyMap<string, string>): Edge[] {
  const edges: Edge[] = [];
  for (const [file, text] of sources) {
    const body = code(text);
    const at = (spec: string): string => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
    for (const m of body.matchAll(STATIC)) edges.push({ from: file, to: at(m[3]!), typeOnly: m[2] !== undefined });
    // `import('./x').T` in a type position loads nothing.
    for (const m of body.matchAll(DYNAMIC)) edges.push({ from: file, to: at(m[1]!), typeOnly: m[2] !== undefined });
  }
  return edges;
}

/** Every import against the direction, and every loop of imports, as one line each; `known` is left out. */
export function violations(sources: ReadonlyMap<string, string>, known: readonly string[] = KNOWN): { found: string[]; stale: string[] } {
  const edges = edgesOf(sources);
  const found = new Set<string>();
  for (const file of sources.keys()) if (layerOf(file) === undefined) found.add(`${file}: in no layer`);
  for (const e of edges) {
    const from = layerOf(e.from);
    const to = layerOf(e.to);
    const arrow = `${e.from} -> ${e.to}`;
    if (to === undefined) {
      if (!e.to.startsWith('src/') && !e.to.startsWith('graphs/')) found.add(`${arrow}: outside src/ and graphs/`);
      else found.add(`${e.to}: in no layer`);
    }
    if (from === undefined || to === undefined || from === to) continue;
    if (from.rank <= to.rank) found.add(`${arrow}: ${from.name} may not import ${to.name}`);
    else if (to.name === 'node' && from.name !== 'graphs') found.add(`${arrow}: only graphs/ import the node kit`);
    else if (from.name === 'graphs' && to.name !== 'node' && e.to !== 'src/nodefile/types.ts') {
      found.add(`${arrow}: a graph imports the node kit and the Nodefile API only`);
    } else if (to.name === 'nodefile' && NOTHING_FROM_NODEFILE.has(from.name)) {
      found.add(`${arrow}: ${from.name} takes nothing from nodefile`);
    } else if (!e.typeOnly && to.name === 'nodefile' && TYPES_ONLY_FROM_NODEFILE.has(from.name)) {
      found.add(`${arrow}: ${from.name} takes only types from nodefile`);
    } else if (!e.typeOnly && from.name === 'plan' && to.name === 'state') found.add(`${arrow}: plan takes only types from state`);
  }
  for (const group of loops(edges)) found.add(`loop among ${group.join(', ')}`);
  const stale = new Set(known);
  const result: string[] = [];
  for (const line of found) {
    const match = known.find((k) => line === k || line.startsWith(`${k}:`));
    if (match === undefined) result.push(line);
    else stale.delete(match);
  }
  return { found: result.sort(), stale: [...stale] };
}

/** The groups of files that import each other, directly or not (Tarjan's strongly connected components). */
function loops(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) {
    if (!next.has(e.from)) next.set(e.from, []);
    next.get(e.from)!.push(e.to);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return groups;
}

/** The .ts files below src/ and graphs/ of `root`, by path relative to it. */
export function readSources(root: string): Map<string, string> {
  const sources = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) sources.set(rel, readFileSync(path.join(root, rel), 'utf8'));
    }
  };
  walk('src');
  walk('graphs');
  return sources;
}

if (import.meta.main) {
  const { found, stale } = violations(readSources(path.join(import.meta.dirname, '..')));
  for (const line of found) console.log(line);
  for (const line of stale) console.log(`no longer found, take it off KNOWN: ${line}`);
  process.exitCode = found.length === 0 ? 0 : 1;
}
