// An unchanged task is decided from stats through the hash cache: a file whose
// stat matches a settled entry is not read again. These properties hold that
// this never trusts what was not verified, over random graphs and random
// scripts of edits on real files: content changes (some of the same size with
// the mtime put back, so only the ctime moves), touches and rewrites that keep
// the content, tampered outputs, the engine's clock (EngineOptions.now) an hour
// ahead of the files, level with the newest of them (racy entries) or before
// them all (nothing settled), and applies killed (SIGKILL) between a task's
// action and its record. After every apply the outputs are a from-scratch
// build's; after an apply that was not killed, exactly what a real change
// reaches ran, once; and a second apply, whatever its clock, runs nothing.
// 10 histories here; 100 with NODEGRAPH_CRASH_CAMPAIGN=1 (CI sets it).

import fc from 'fast-check';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { applyNodefile } from '../../src/apply.ts';
import type { EngineEvent } from '../../src/events.ts';

interface TaskDef {
  readonly id: string;
  readonly leaf: number | undefined;
  readonly deps: readonly number[];
}

const LEAVES = 3;

const NODEFILE = `
import { readFileSync, writeFileSync } from 'node:fs';
export default (ng) => {
  const spec = JSON.parse(readFileSync(ng.dir + '/graph.json', 'utf8'));
  for (const t of spec.tasks) {
    const inputs = {};
    if (t.leaf !== null) inputs.src = ng.file('leaves/' + t.leaf);
    for (const d of t.deps) inputs['dep' + d] = ng.ref('t' + d);
    ng.task(t.id, {
      inputs,
      outputs: ['out/' + t.id],
      // A function is known by its source text, which vitest's loader rewrites: a version makes
      // the definition the same in this process and in a plain node one.
      version: '1',
      run: (ctx) => {
        let text = t.id + ':';
        if (t.leaf !== null) text += readFileSync(ctx.cwd + '/leaves/' + t.leaf, 'utf8');
        for (const d of t.deps) text += '(' + readFileSync(ctx.cwd + '/out/t' + d, 'utf8') + ')';
        writeFileSync(ctx.cwd + '/out/' + t.id, text);
      },
    });
  }
};
`;

/** What a from-scratch build writes. */
function expected(tasks: readonly TaskDef[], leaves: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const t of tasks) {
    let text = `${t.id}:`;
    if (t.leaf !== undefined) text += leaves[t.leaf];
    for (const d of t.deps) text += `(${out.get(`t${d}`)})`;
    out.set(t.id, text);
  }
  return out;
}

type Edit =
  | { readonly kind: 'content'; readonly leaf: number; readonly text: string }
  /** Another content of the same size, its mtime put back as it was: only the ctime says it changed. */
  | { readonly kind: 'same-size'; readonly leaf: number }
  /** A new mtime (maybe in the future), the same content. */
  | { readonly kind: 'touch'; readonly leaf: number; readonly seconds: number }
  | { readonly kind: 'rewrite'; readonly leaf: number }
  | { readonly kind: 'tamper'; readonly task: number };

/** The engine's clock for one apply: ahead of every file, level with the newest, or before them all. */
type Clock = 'ahead' | 'racy' | 'behind';

interface Step {
  readonly edits: readonly Edit[];
  readonly clock: Clock;
  /** Kill an apply (in a process of its own) right after this task's action, before its record. */
  readonly kill: number | undefined;
  readonly again: Clock;
}

const editArb: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('content' as const), leaf: fc.nat(LEAVES - 1), text: fc.string({ maxLength: 4 }) }),
  fc.record({ kind: fc.constant('same-size' as const), leaf: fc.nat(LEAVES - 1) }),
  fc.record({ kind: fc.constant('touch' as const), leaf: fc.nat(LEAVES - 1), seconds: fc.integer({ min: -5000, max: 5000 }) }),
  fc.record({ kind: fc.constant('rewrite' as const), leaf: fc.nat(LEAVES - 1) }),
  fc.record({ kind: fc.constant('tamper' as const), task: fc.nat(10) }),
);
const clockArb = fc.constantFrom<Clock>('ahead', 'racy', 'behind');
const stepArb: fc.Arbitrary<Step> = fc.record({
  edits: fc.array(editArb, { minLength: 1, maxLength: 3 }),
  clock: clockArb,
  kill: fc.option(fc.nat(10), { nil: undefined, freq: 3 }),
  again: clockArb,
});

const worldArb = fc.integer({ min: 1, max: 6 }).chain((n) =>
  fc.record({
    leaves: fc.array(fc.string({ minLength: 1, maxLength: 4 }), { minLength: LEAVES, maxLength: LEAVES }),
    tasks: fc.tuple(
      ...Array.from({ length: n }, (_, i) =>
        fc.record({
          leaf: fc.option(fc.nat(LEAVES - 1), { nil: undefined }),
          deps: i === 0 ? fc.constant([] as number[]) : fc.uniqueArray(fc.nat(i - 1), { maxLength: 2 }),
        }),
      ),
    ),
  }),
);

const CHILD = path.join(import.meta.dirname, '../support/apply-child.ts');

class Scenario {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-stat-'));
  readonly nodefile = path.join(this.dir, 'Nodefile.ts');
  readonly tasks: readonly TaskDef[];
  readonly leaves: string[];
  /** Each output's content as the last apply left it; the tasks whose output was tampered with since. */
  applied = new Map<string, string>();
  readonly tampered = new Set<string>();
  appliedLeaves: string[] = [];

  constructor(tasks: readonly TaskDef[], leaves: readonly string[]) {
    this.tasks = tasks;
    this.leaves = [...leaves];
    mkdirSync(path.join(this.dir, 'leaves'));
    writeFileSync(this.nodefile, NODEFILE);
    writeFileSync(path.join(this.dir, 'graph.json'), JSON.stringify({ tasks: tasks.map((t) => ({ ...t, leaf: t.leaf ?? null })) }));
    this.leaves.forEach((text, i) => writeFileSync(this.leaf(i), text));
  }

  leaf(i: number): string {
    return path.join(this.dir, 'leaves', String(i));
  }

  edit(e: Edit): void {
    switch (e.kind) {
      case 'content':
        this.leaves[e.leaf] = e.text;
        writeFileSync(this.leaf(e.leaf), e.text);
        break;
      case 'same-size': {
        // touch -r keeps the nanoseconds, which utimes (seconds as a float) would round.
        const times = path.join(this.dir, 'times');
        execFileSync('touch', ['-r', this.leaf(e.leaf), times]);
        const text = [...this.leaves[e.leaf]!].map((c) => (c === 'a' ? 'b' : 'a')).join('');
        this.leaves[e.leaf] = text;
        writeFileSync(this.leaf(e.leaf), text);
        execFileSync('touch', ['-r', times, this.leaf(e.leaf)]);
        break;
      }
      case 'touch': {
        const at = new Date(Date.now() + e.seconds * 1000);
        utimesSync(this.leaf(e.leaf), at, at);
        break;
      }
      case 'rewrite':
        writeFileSync(this.leaf(e.leaf), this.leaves[e.leaf]!);
        break;
      case 'tamper': {
        const id = this.tasks[e.task % this.tasks.length]!.id;
        const out = path.join(this.dir, 'out', id);
        if (existsSync(out)) writeFileSync(out, `${readFileSync(out, 'utf8')}!`);
        this.tampered.add(id);
        break;
      }
    }
  }

  /** The clock's nanoseconds: ahead of every file an hour, level with the newest file's change, or before the epoch's first second. */
  clock(kind: Clock): bigint {
    if (kind === 'ahead') return (BigInt(Date.now()) + 3_600_000n) * 1_000_000n;
    if (kind === 'behind') return 1_000_000_000n;
    let newest = 0n;
    const files = [...this.leaves.keys()].map((i) => this.leaf(i));
    for (const t of this.tasks) files.push(path.join(this.dir, 'out', t.id));
    for (const file of files) {
      const st = statSync(file, { bigint: true, throwIfNoEntry: false });
      if (st !== undefined) for (const ns of [st.mtimeNs, st.ctimeNs]) if (ns > newest) newest = ns;
    }
    return newest;
  }

  /** The tasks an engine with early cutoff must run now: a changed input, a tampered output, or an upstream whose output changes. */
  mustRun(): string[] {
    const now = expected(this.tasks, this.leaves);
    return this.tasks
      .filter((t) => {
        if (!this.applied.has(t.id) || this.tampered.has(t.id)) return true;
        if (t.leaf !== undefined && this.appliedLeaves[t.leaf] !== this.leaves[t.leaf]) return true;
        return t.deps.some((d) => this.applied.get(`t${d}`) !== now.get(`t${d}`));
      })
      .map((t) => t.id)
      .sort();
  }

  async apply(clock: Clock): Promise<{ ran: string[]; starts: Map<string, number> }> {
    const events: EngineEvent[] = [];
    const at = this.clock(clock);
    const result = await applyNodefile({ nodefile: this.nodefile, jobs: 2, onEvent: (e) => events.push(e), now: () => at });
    if (!result.ok) throw new Error(JSON.stringify(result.error));
    expect(result.value.failed).toEqual([]);
    const starts = new Map<string, number>();
    for (const e of events) if (e.type === 'task-start') starts.set(e.id, (starts.get(e.id) ?? 0) + 1);
    this.applied = new Map(expected(this.tasks, this.leaves));
    this.appliedLeaves = [...this.leaves];
    this.tampered.clear();
    return { ran: [...result.value.ran].sort(), starts };
  }

  /** An apply in a process of its own, killed right after `task`'s action if it gets that far: undefined if it was, else what ran. */
  killedApply(task: string, clock: Clock): string[] | undefined {
    const child = spawnSync(process.execPath, [CHILD, this.nodefile, String(this.clock(clock))], {
      env: { ...process.env, NODEGRAPH_FAILPOINT: `ran:${task}` },
      encoding: 'utf8',
    });
    if (child.signal === 'SIGKILL') return undefined;
    expect(child.status, child.stderr).toBe(0);
    return (JSON.parse(child.stdout) as string[]).sort();
  }

  outputs(): Map<string, string> {
    return new Map(this.tasks.map((t) => [t.id, readFileSync(path.join(this.dir, 'out', t.id), 'utf8')]));
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const campaign = process.env['NODEGRAPH_CRASH_CAMPAIGN'] === '1';

describe('deciding unchanged from stats', () => {
  test('trusts no stat it did not verify: edits, touches, racy clocks and kills between action and record', async () => {
    await fc.assert(
      fc.asyncProperty(worldArb, fc.array(stepArb, { minLength: 1, maxLength: 4 }), async (raw, steps) => {
        const tasks = raw.tasks.map((t, i) => ({ id: `t${i}`, leaf: t.leaf, deps: t.deps }));
        const s = new Scenario(tasks, raw.leaves);
        try {
          mkdirSync(path.join(s.dir, 'out'));
          await s.apply('ahead');
          for (const step of steps) {
            for (const e of step.edits) s.edit(e);
            let must = s.mustRun();
            let killed = false;
            if (step.kill !== undefined) {
              const ran = s.killedApply(tasks[step.kill % tasks.length]!.id, step.clock);
              killed = ran === undefined;
              // Not killed (that task had nothing to do): a whole apply, which leaves nothing to run.
              if (ran !== undefined) expect(ran).toEqual(must);
              if (ran !== undefined) must = [];
            }
            const { ran, starts } = await s.apply(step.clock);
            expect(s.outputs()).toEqual(expected(tasks, s.leaves));
            // After a killed apply some tasks are recorded and some are not: what runs is then only bounded.
            if (killed) for (const id of ran) expect(must).toContain(id);
            else expect(ran).toEqual(must);
            for (const n of starts.values()) expect(n).toBe(1);
            expect((await s.apply(step.again)).ran).toEqual([]);
          }
        } finally {
          s.cleanup();
        }
      }),
      { numRuns: campaign ? 100 : 10 },
    );
    // A guard against a hang, not a bound on speed: the campaign's 100 histories took over 300 s on a busy 2-core machine.
  }, campaign ? 900_000 : 300_000);
});
