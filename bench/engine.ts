// The engine a benchmark measures: a snapshot of the checkout's bin/ and src/
// taken when the benchmark starts, bundled as `npm pack` bundles it, so that
// edits to src/ while a run goes on do not change what is measured half-way,
// and what is measured is what an installed package runs.

import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { must } from './process.ts';

/** Copies bin/, src/, scripts/, bench/hash.ts and package.json from `repo` to `engine`, node_modules linked, and bundles it. */
export async function snapshotEngine(repo: string, engine: string, node: string): Promise<void> {
  rmSync(engine, { recursive: true, force: true });
  mkdirSync(path.join(engine, 'bench'), { recursive: true });
  for (const part of ['bin', 'src', 'scripts']) cpSync(path.join(repo, part), path.join(engine, part), { recursive: true });
  cpSync(path.join(repo, 'package.json'), path.join(engine, 'package.json'));
  if (existsSync(path.join(repo, 'bench', 'hash.ts'))) cpSync(path.join(repo, 'bench', 'hash.ts'), path.join(engine, 'bench', 'hash.ts'));
  symlinkSync(path.join(repo, 'node_modules'), path.join(engine, 'node_modules'));
  await must([node, path.join(engine, 'scripts', 'build-dist.ts'), '--without-types'], engine);
  if (!existsSync(path.join(engine, 'dist', 'lib', 'main.js'))) throw new Error('bundling the engine made no dist/lib/main.js');
}
