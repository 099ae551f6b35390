import path from 'node:path';
import { loadGraph, observeAndPlan, resolveTargets, withSession } from '../engine.ts';
import { toGraphology, type EdgeAttributes } from '../graph/export.ts';
import type { TaskGraph } from '../graph/graph.ts';
import type { TaskId } from '../ids.ts';
import { ok } from '../util/result.ts';
import type { CliIo } from './output.ts';
import { engineOptions, printFailures, str, type Args } from './shared.ts';
import { statusOf, type TaskStatus } from './status.ts';

const quote = (s: string): string => JSON.stringify(s);

/** What an export shows: the tasks kept (all, or the targets' closure) and, with --status, each one's status. */
export interface GraphView {
  readonly graph: TaskGraph;
  readonly only?: ReadonlySet<TaskId>;
  readonly status?: ReadonlyMap<TaskId, TaskStatus>;
}

/** A task's namespace: its id up to the first `/` (`kube1/containerd` → `kube1`), or '' for none. */
const namespaceOf = (id: string): string => (id.includes('/') ? id.slice(0, id.indexOf('/')) : '');

const STATUS_COLOR: Record<TaskStatus, string> = {
  applied: '#b7e1a1',
  running: '#b7e1a1',
  stale: '#ffe699',
  drifted: '#f4a582',
  failed: '#e06666',
  stopped: '#c9c9c9',
  absent: '#ffffff',
  trace: '#f4a582',
  orphan: '#d5a6bd',
};

const edgeLabel = (a: EdgeAttributes): string => a.inputs.join(', ');

function byNamespace(ids: readonly string[]): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const id of ids) {
    const ns = namespaceOf(id);
    let list = groups.get(ns);
    if (list === undefined) groups.set(ns, (list = []));
    list.push(id);
  }
  return groups;
}

export function toDot(view: GraphView): string {
  const g = toGraphology(view.graph, view.only);
  const lines = ['digraph nodegraph {', '  rankdir=LR;', '  node [shape=box];'];
  const node = (id: string, indent: string): string => {
    const status = view.status?.get(id as TaskId);
    return `${indent}${quote(id)}${status === undefined ? '' : ` [style=filled, fillcolor=${quote(STATUS_COLOR[status])}, tooltip=${quote(status)}]`};`;
  };
  let cluster = 0;
  for (const [ns, ids] of byNamespace(g.nodes())) {
    if (ns === '') {
      for (const id of ids) lines.push(node(id, '  '));
      continue;
    }
    lines.push(`  subgraph cluster_${cluster++} {`, `    label=${quote(`${ns}/`)};`);
    for (const id of ids) lines.push(node(id, '    '));
    lines.push('  }');
  }
  g.forEachEdge((_edge, a, source, target) => {
    const label = edgeLabel(a);
    const attrs = a.kind === 'after' ? ' [style=dashed]' : label === '' ? '' : ` [label=${quote(label)}]`;
    lines.push(`  ${quote(source)} -> ${quote(target)}${attrs};`);
  });
  lines.push('  subgraph cluster_legend {', '    label="legend";', '    node [shape=plaintext];');
  lines.push('    "legend:a" [label="upstream"]; "legend:b" [label="consumes it (trigger)"]; "legend:c" [label="runs after it (order only)"];');
  lines.push('    "legend:a" -> "legend:b" [label="input"];', '    "legend:a" -> "legend:c" [style=dashed];');
  if (view.status !== undefined) {
    for (const [status, color] of Object.entries(STATUS_COLOR)) lines.push(`    ${quote(`legend:${status}`)} [label=${quote(status)}, shape=box, style=filled, fillcolor=${quote(color)}];`);
  }
  lines.push('  }', '}');
  return lines.join('\n');
}

export function toMermaid(view: GraphView): string {
  const g = toGraphology(view.graph, view.only);
  const index = new Map(g.nodes().map((id, i) => [id, `t${i}`]));
  const lines = ['flowchart LR'];
  for (const [ns, ids] of byNamespace(g.nodes())) {
    const indent = ns === '' ? '  ' : '    ';
    if (ns !== '') lines.push(`  subgraph ${quote(`${ns}/`)}`);
    for (const id of ids) {
      const status = view.status?.get(id as TaskId);
      lines.push(`${indent}${index.get(id)}[${quote(id)}]${status === undefined ? '' : `:::${status}`}`);
    }
    if (ns !== '') lines.push('  end');
  }
  g.forEachEdge((_edge, a, source, target) => {
    const label = edgeLabel(a);
    lines.push(`  ${index.get(source)} ${a.kind === 'after' ? '-.->' : label === '' ? '-->' : `-->|${quote(label)}|`} ${index.get(target)}`);
  });
  // The legend as nodes a renderer draws (a comment it would not): the two kinds of edge, and with --status the colors.
  lines.push('  subgraph legend', '    legend_up["upstream"]', '    legend_in["consumes it (trigger)"]', '    legend_after["runs after it (order only)"]');
  lines.push('    legend_up -->|"input"| legend_in', '    legend_up -.-> legend_after');
  if (view.status !== undefined) for (const status of Object.keys(STATUS_COLOR)) lines.push(`    legend_${status}[${status}]:::${status}`);
  lines.push('  end');
  if (view.status !== undefined) for (const [status, color] of Object.entries(STATUS_COLOR)) lines.push(`  classDef ${status} fill:${color}`);
  return lines.join('\n');
}

export function shownOutput(dir: string, output: string): string {
  const relative = path.relative(dir, output);
  return relative === '' || relative === '..' || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative) ? output : relative;
}

export function toJson(view: GraphView): string {
  const { graph, only, status } = view;
  const g = toGraphology(graph, only);
  return JSON.stringify({
    format: 'nodegraph-graph',
    version: 1,
    tasks: graph.ordered
      .filter((n) => only === undefined || only.has(n.id))
      .map((n) => ({
        id: n.id,
        namespace: namespaceOf(n.id),
        needs: n.needs.filter((id) => g.hasNode(id)),
        after: n.after.filter((id) => g.hasNode(id)),
        outputs: n.outputs.map((o) => shownOutput(graph.dir, o)),
        ...(status === undefined ? {} : { status: status.get(n.id) }),
      })),
    edges: g.mapEdges((_edge, a, from, to) => ({ from, to, kind: a.kind, ...(a.kind === 'input' ? { inputs: a.inputs } : {}) })),
  });
}

export async function run(args: Args, io: CliIo): Promise<number> {
  // --json, which every command takes, asks for the JSON document here too.
  const format = str(args.values['format']) ?? (args.values['json'] === true ? 'json' : 'dot');
  if (args.values['json'] === true && format !== 'json') {
    return printFailures([{ reason: 'usage', command: 'graph', message: `--json asks for JSON, --format for ${format}: give one` }], io);
  }
  if (!['dot', 'mermaid', 'json'].includes(format)) {
    return printFailures([{ reason: 'usage', command: 'graph', message: `--format is dot, mermaid or json, not ${format}` }], io);
  }
  const options = engineOptions(args, io, 'graph');
  if ('reason' in options) return printFailures([options], io);
  const loaded = await loadGraph(options.nodefile, options.stateDir);
  if (!loaded.ok) return printFailures(loaded.error, io);
  const graph = loaded.value;
  const targets = resolveTargets(args.positionals, (id) => graph.has(id), () => graph.ordered.map((n) => n.id));
  if (!targets.ok) return printFailures(targets.error, io);
  const only = targets.value === undefined ? undefined : graph.closure([...targets.value]);
  let status: Map<TaskId, TaskStatus> | undefined;
  if (args.values['status'] === true) {
    const seen = await withSession(options, { lock: false }, async (session) => {
      const observed = await observeAndPlan(session, { shown: true });
      if (!observed.ok) return observed;
      const stops = (id: TaskId): boolean => session.graph.get(id)?.decl.spec.stop !== undefined;
      return ok(new Map(observed.value.plan.entries().map((e) => [e.id, statusOf(e, session.state.records.get(e.id), { stops: stops(e.id) })])));
    });
    if (!seen.ok) return printFailures(seen.error, io);
    status = seen.value;
  }
  const view: GraphView = { graph, ...(only === undefined ? {} : { only }), ...(status === undefined ? {} : { status }) };
  const text = format === 'dot' ? toDot(view) : format === 'mermaid' ? toMermaid(view) : toJson(view);
  io.stdout.write(`${text}\n`);
  return 0;
}
