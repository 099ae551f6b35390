// The atomic apply's guarantee over random graphs and random failures, on real
// files: after an atomic apply that fails — a task that throws before or after
// writing its output, anywhere in the graph, after random edits to inputs,
// versions and edges, with tasks that scribble on a preserved folder — every
// output and every preserved file equals its content before the apply, and a
// plan that follows finds nothing to do.

import fc from 'fast-check';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { applyNodefile } from '../../src/apply.ts';
import { planNodefile } from '../../src/operations.ts';
import { describeTree } from '../support/tree.ts';

interface TaskDef {
  leaf: number | null;
  deps: number[];
  version: number;
  /** Writes keep/<id> when it runs: what a preserved path's other writers do. */
  scribble: boolean;
  /** 'before': throws before writing its output; 'after': writes it, then throws. */
  fail: 'before' | 'after' | null;
}

const NODEFILE = `
import { readFileSync, writeFileSync } from 'node:fs';
export default (ng) => {
  const spec = JSON.parse(readFileSync(ng.dir + '/graph.json', 'utf8'));
  ng.preserve('keep');
  const graph = ng.task('graph', { inputs: { file: ng.file('graph.json') }, run: () => {} });
  spec.tasks.forEach((t, i) => {
    const inputs = { graph };
    if (t.leaf !== null) inputs.src = ng.file('leaves/' + t.leaf);
    for (const d of t.deps) inputs['dep' + d] = ng.ref('t' + d);
    ng.task('t' + i, {
      inputs,
      outputs: ['out/t' + i],
      version: String(t.version),
      run: (ctx) => {
        let text = 't' + i + '@' + t.version + ':';
        if (t.leaf !== null) text += readFileSync(ctx.cwd + '/leaves/' + t.leaf, 'utf8');
        for (const d of t.deps) text += readFileSync(ctx.cwd + '/out/t' + d, 'utf8');
        if (t.scribble) writeFileSync(ctx.cwd + '/keep/t' + i, text);
        if (t.fail === 'before') throw new Error('injected before writing');
        writeFileSync(ctx.cwd + '/out/t' + i, text);
        if (t.fail === 'after') throw new Error('injected after writing');
      },
    });
  });
};
`;

const LEAVES = 3;

const taskArb = (i: number): fc.Arbitrary<TaskDef> =>
  fc.record({
    leaf: fc.option(fc.nat(LEAVES - 1), { nil: null }),
    deps: i === 0 ? fc.constant([]) : fc.uniqueArray(fc.nat(i - 1), { maxLength: 2 }),
    version: fc.constant(1),
    scribble: fc.constant(false),
    fail: fc.constant(null),
  });

const worldArb = fc.integer({ min: 1, max: 8 }).chain((n) =>
  fc.record({
    leaves: fc.array(fc.string({ maxLength: 5 }), { minLength: LEAVES, maxLength: LEAVES }),
    tasks: fc.tuple(...Array.from({ length: n }, (_, i) => taskArb(i))),
  }),
);

/** The change that fails: random edits, then one task made to fail. */
const changeArb = fc.record({
  leaves: fc.array(fc.option(fc.string({ maxLength: 5 }), { nil: undefined }), { minLength: LEAVES, maxLength: LEAVES }),
  bumps: fc.array(fc.nat(20), { maxLength: 3 }),
  scribblers: fc.array(fc.nat(20), { maxLength: 3 }),
  dropEdge: fc.option(fc.nat(20), { nil: undefined }),
  added: fc.boolean(),
  failing: fc.nat(20),
  when: fc.constantFrom('before' as const, 'after' as const),
});

test('after a failed atomic apply every output and preserved file is as before, and a plan finds nothing to do', async () => {
  await fc.assert(
    fc.asyncProperty(worldArb, changeArb, async (world, change) => {
      const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-atomic-prop-'));
      try {
        const write = (w: { leaves: string[]; tasks: TaskDef[] }): void => {
          w.leaves.forEach((c, i) => writeFileSync(path.join(dir, 'leaves', String(i)), c));
          writeFileSync(path.join(dir, 'graph.json'), JSON.stringify({ tasks: w.tasks }));
        };
        mkdirSync(path.join(dir, 'leaves'));
        mkdirSync(path.join(dir, 'keep/sub'), { recursive: true });
        writeFileSync(path.join(dir, 'keep/sub/identity'), 'kept\n');
        writeFileSync(path.join(dir, 'Nodefile.ts'), NODEFILE);
        write(world);
        const options = { nodefile: path.join(dir, 'Nodefile.ts'), jobs: 2 };
        const first = await applyNodefile(options);
        expect(first.ok && first.value.failed.length === 0).toBe(true);
        const outputs = describeTree(path.join(dir, 'out'));
        const keep = describeTree(path.join(dir, 'keep'));

        const tasks = world.tasks.map((t) => ({ ...t, deps: [...t.deps] }));
        if (change.added) tasks.push({ leaf: 0, deps: [tasks.length - 1], version: 1, scribble: true, fail: null });
        const pick = (i: number): TaskDef => tasks[i % tasks.length]!;
        for (const b of change.bumps) pick(b).version++;
        for (const s of change.scribblers) pick(s).scribble = true;
        if (change.dropEdge !== undefined) pick(change.dropEdge).deps.pop();
        pick(change.failing).fail = change.when;
        pick(change.failing).version++;
        write({ leaves: world.leaves.map((l, i) => change.leaves[i] ?? l), tasks });

        const failed = await applyNodefile({ ...options, atomic: true });
        expect(failed.ok).toBe(false);
        if (failed.ok) return;
        const last = failed.error.at(-1)!;
        expect(last).toMatchObject({ reason: 'atomic-apply-failed', rolledBack: true, from: 1, to: 2 });
        expect(describeTree(path.join(dir, 'out'))).toEqual(outputs);
        expect(describeTree(path.join(dir, 'keep'))).toEqual(keep);
        expect(JSON.parse(readFileSync(path.join(dir, 'graph.json'), 'utf8'))).toEqual({ tasks: world.tasks });
        const plan = await planNodefile(options);
        expect(plan.ok && plan.value.plan.counts.unchanged === plan.value.plan.size).toBe(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }),
    { numRuns: 25 },
  );
}, 240_000);
