import { loadGraph } from '../engine.ts';
import { toGraphology } from '../graph/export.ts';
import type { TaskGraph } from '../graph/graph.ts';
import type { CliIo } from './main.ts';
import { printFailures, str, type Args } from './shared.ts';
import path from 'node:path';

const quote = (s: string): string => JSON.stringify(s);

export function toDot(graph: TaskGraph): string {
  const g = toGraphology(graph);
  const lines = ['digraph nodegraph {', '  rankdir=LR;', '  node [shape=box];'];
  g.forEachNode((id) => {
    lines.push(`  ${quote(id)};`);
    g.forEachInEdge(id, (_edge, attributes, source) => {
      lines.push(`  ${quote(source)} -> ${quote(id)}${attributes.kind === 'after' ? ' [style=dashed]' : ''};`);
    });
  });
  lines.push('}');
  return lines.join('\n');
}

export function toMermaid(graph: TaskGraph): string {
  const g = toGraphology(graph);
  const index = new Map(g.nodes().map((id, i) => [id, `t${i}`]));
  const lines = ['flowchart LR'];
  g.forEachNode((id) => {
    lines.push(`  ${index.get(id)}[${quote(id)}]`);
    g.forEachInEdge(id, (_edge, attributes, source) => {
      lines.push(`  ${index.get(source)} ${attributes.kind === 'after' ? '-.->' : '-->'} ${index.get(id)}`);
    });
  });
  return lines.join('\n');
}

export function toJson(graph: TaskGraph): string {
  return JSON.stringify({
    format: 'nodegraph-graph',
    version: 1,
    tasks: graph.ordered.map((n) => ({
      id: n.id,
      needs: n.needs,
      after: n.after,
      outputs: n.outputs.map((o) => path.relative(graph.dir, o)),
    })),
  });
}

export async function run(args: Args, io: CliIo): Promise<number> {
  const format = str(args.values['format']) ?? 'dot';
  if (!['dot', 'mermaid', 'json'].includes(format)) {
    return printFailures([{ reason: 'usage', message: `--format is dot, mermaid or json, not ${format}` }], io);
  }
  const graph = await loadGraph(path.resolve(io.cwd, str(args.values['file']) ?? 'Nodefile.ts'));
  if (!graph.ok) return printFailures(graph.error, io);
  const text = format === 'dot' ? toDot(graph.value) : format === 'mermaid' ? toMermaid(graph.value) : toJson(graph.value);
  io.stdout.write(`${text}\n`);
  return 0;
}
