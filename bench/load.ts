// How long nodegraph takes to load and check a Nodefile of N leaves (issue 2:
// "a 50,000-task graph must load in well under a second"): the benchmark's
// own Nodefile (loops, as a user writes it), no file on disk but the Nodefile,
// nothing run. Each measurement is a fresh process, as a CLI run is.
//
//   node bench/load.ts [N=50000] [RUNS=7]
//
// Prints, per run and as medians: importing the engine, then loadGraph
// (running the Nodefile, recording its declarations, analysis: duplicates,
// producers, edges, cycles, order), wall and process CPU (GC threads included).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { layout, nodefile } from './generate.ts';

const ENGINE = path.resolve(import.meta.dirname, '../src/engine.ts');

if (process.argv[2] === '--child') {
  const file = process.argv[3]!;
  // As bin/nodegraph.js does: V8's code cache, which also keeps the type-stripped
  // Nodefile (the first load after an edit strips it again).
  if (process.env.BENCH_CACHE !== '0') process.getBuiltinModule('node:module').enableCompileCache?.();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const { loadGraph } = (await import(ENGINE)) as typeof import('../src/engine.ts');
  const t1 = performance.now();
  const cpu1 = process.cpuUsage(cpu0);
  const graph = await loadGraph(file);
  const t2 = performance.now();
  const cpu2 = process.cpuUsage(cpu0);
  if (!graph.ok) throw new Error(JSON.stringify(graph.error).slice(0, 500));
  const cpuMs = (c: NodeJS.CpuUsage): number => (c.user + c.system) / 1000;
  process.stdout.write(
    JSON.stringify({ tasks: graph.value.size, importMs: t1 - t0, loadMs: t2 - t1, loadCpuMs: cpuMs(cpu2) - cpuMs(cpu1), rssMiB: process.memoryUsage().rss / 2 ** 20 }),
  );
} else {
  const n = Number(process.argv[2] ?? 50000);
  const runs = Number(process.argv[3] ?? 7);
  const shape = layout(n);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nodegraph-load-'));
  try {
    writeFileSync(path.join(dir, 'Nodefile.ts'), nodefile(n));
    const results: { tasks: number; importMs: number; loadMs: number; loadCpuMs: number; rssMiB: number }[] = [];
    for (let r = 0; r < runs; r++) {
      const child = spawnSync(process.execPath, [import.meta.filename, '--child', path.join(dir, 'Nodefile.ts')], { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(child.stderr);
      const result = JSON.parse(child.stdout) as (typeof results)[number];
      if (result.tasks !== shape.tasks) throw new Error(`expected ${shape.tasks} tasks, loaded ${result.tasks}`);
      results.push(result);
      const f = (v: number): string => v.toFixed(0).padStart(5);
      console.log(`run ${r + 1}: import ${f(result.importMs)} ms, load+check ${f(result.loadMs)} ms wall, ${f(result.loadCpuMs)} ms CPU, ${f(result.rssMiB)} MiB RSS`);
    }
    const median = (values: number[]): number => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    console.log(
      `${shape.tasks} tasks, median of ${runs}: import ${median(results.map((r) => r.importMs)).toFixed(0)} ms, ` +
        `load+check ${median(results.map((r) => r.loadMs)).toFixed(0)} ms wall (${median(results.map((r) => r.loadCpuMs)).toFixed(0)} ms CPU); ` +
        `load average ${os.loadavg()[0]!.toFixed(2)}, ${os.availableParallelism()} cores`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
