// The pure planner with in-memory graphs, observations and records.

import { describe, expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import type { TaskGraph } from '../../src/graph/graph.ts';
import { contentHash, taskId, type ContentHash, type TaskId } from '../../src/ids.ts';
import { Builder } from '../../src/nodefile/builder.ts';
import type { NodefileApi } from '../../src/nodefile/types.ts';
import { fingerprintOf, lastRunFailed, type TaskObservation } from '../../src/plan/decide.ts';
import { reasonText } from '../../src/plan/reasons.ts';
import { definitionOf } from '../../src/plan/definition.ts';
import { listedPlan, makePlan as planOf, type PlanEntry, type PlanOptions } from '../../src/plan/plan.ts';
import { teardownOrder } from '../../src/plan/teardown.ts';
import { decodeJournal, encodeLine, frame } from '../../src/state/journal.ts';
import { canonical, type TaskRecord } from '../../src/state/record.ts';
import { RecordTable, type Records } from '../../src/state/records.ts';

/** A hash of the right form: `s` is lowercase hex. */
const h = (s: string): ContentHash => contentHash(s.padEnd(64, '0'));

function graphOf(declare: (ng: NodefileApi) => void): TaskGraph {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  declare(builder.api());
  const result = analyze(builder.declarations());
  if (!result.ok) throw new Error(JSON.stringify(result.error));
  return result.value;
}

/** A record as if the task had just run with these observations and upstream outputs. */
function recordFor(
  graph: TaskGraph,
  id: string,
  observation: TaskObservation,
  upstream: Record<string, ContentHash>,
  outputHash: ContentHash,
): TaskRecord {
  const node = graph.get(taskId(id))!;
  const definition = definitionOf(node, graph.dir);
  const outputs: Record<string, ContentHash> = {};
  for (const [p, v] of observation.outputs) if (v !== 'missing') outputs[p] = v;
  return {
    v: 1,
    id: node.id,
    status: 'ok',
    fingerprint: fingerprintOf(definition, observation.inputs, upstream),
    definition,
    inputs: Object.fromEntries(observation.inputs),
    upstream,
    outputs,
    outputHash,
    edges: { needs: [...node.needs], after: [...node.after] },
    recipe: { cwd: '/n', remove: [...node.outputs], destroy: [], stop: [] },
    startedAt: '2026-01-01T00:00:00.000Z',
    durationMs: 1,
  };
}

const obs = (inputs: Record<string, ContentHash>, outputs: Record<string, ContentHash | 'missing'> = {}, check?: boolean): TaskObservation => ({
  inputs: new Map(Object.entries(inputs)),
  outputs: new Map(Object.entries(outputs)),
  ...(check === undefined ? {} : { check: { ok: check, detail: check ? '' : 'not running' } }),
});

const declareChain = (ng: NodefileApi): void => {
  const a = ng.task('a', { inputs: { src: ng.file('a.txt') }, outputs: ['out/a'], run: ['cp', 'a.txt', 'out/a'] });
  const b = ng.task('b', { inputs: { a }, outputs: ['out/b'], run: ['cp', 'out/a', 'out/b'] });
  ng.task('c', { after: [b], run: ['true'], check: ['true'], verbs: { update: 'restart' } });
};

function appliedChain(): { graph: TaskGraph; records: Map<TaskId, TaskRecord>; seen: Map<TaskId, TaskObservation> } {
  const graph = graphOf(declareChain);
  const seen = new Map<TaskId, TaskObservation>([
    [taskId('a'), obs({ src: h('1') }, { '/n/out/a': h('a1') })],
    [taskId('b'), obs({}, { '/n/out/b': h('b1') })],
    [taskId('c'), obs({}, {}, true)],
  ]);
  const records = new Map<TaskId, TaskRecord>([
    [taskId('a'), recordFor(graph, 'a', seen.get(taskId('a'))!, {}, h('aa'))],
    [taskId('b'), recordFor(graph, 'b', seen.get(taskId('b'))!, { a: h('aa') }, h('bb'))],
    [taskId('c'), recordFor(graph, 'c', seen.get(taskId('c'))!, {}, h('cc'))],
  ]);
  return { graph, records, seen };
}

const actions = (plan: ReturnType<typeof makePlan>): Record<string, string> =>
  Object.fromEntries(plan.entries().map((e) => [e.id, `${e.action}: ${e.reasons.join('; ')}`]));

/** The same records as the journal loads them: lines, parsed when read (state/records.ts). */
function asJournal(records: ReadonlyMap<TaskId, TaskRecord>): RecordTable {
  const lines = [frame(JSON.stringify({ format: 'nodegraph-state', version: 2 })), ...[...records.values()].map((r) => encodeLine(canonical(r)))];
  const decoded = decodeJournal(Buffer.concat(lines), 'state.jsonl');
  if (!decoded.ok) throw new Error('decode failed');
  return decoded.value.records;
}

/** Plans over records given as a map (set whole) or as the journal loads them. */
const makePlan = (graph: TaskGraph, seen: ReadonlyMap<TaskId, TaskObservation>, records: ReadonlyMap<TaskId, TaskRecord> | Records, options?: PlanOptions) =>
  planOf(graph, seen, records instanceof Map ? RecordTable.of(records.values()) : (records as Records), options);

describe('makePlan', () => {
  test('with no state every task is created, in topological order', () => {
    const graph = graphOf(declareChain);
    const seen = new Map(graph.ordered.map((n) => [n.id, obs(n.id === 'a' ? { src: h('1') } : {})]));
    const plan = makePlan(graph, seen, new Map());
    expect(plan.entries().map((e) => `${e.id} ${e.verb}`)).toEqual(['a create', 'b create', 'c create']);
    expect(plan.counts).toMatchObject({ create: 3, unchanged: 0 });
  });

  test('everything as recorded: all unchanged', () => {
    const { graph, records, seen } = appliedChain();
    expect(actions(makePlan(graph, seen, records))).toEqual({ a: 'unchanged: ', b: 'unchanged: ', c: 'unchanged: ' });
  });

  test('a changed input makes the task update and its consumer known after apply; an order edge does not propagate', () => {
    const { graph, records, seen } = appliedChain();
    seen.set(taskId('a'), obs({ src: h('2') }, { '/n/out/a': h('a1') }));
    expect(actions(makePlan(graph, seen, records))).toEqual({
      a: 'update: input src changed 10000000→20000000',
      b: 'maybe: known after a',
      c: 'unchanged: ',
    });
  });

  test('a modified or missing output is drift; a failing check is drift with its detail', () => {
    const { graph, records, seen } = appliedChain();
    seen.set(taskId('b'), obs({}, { '/n/out/b': h('b2') }));
    seen.set(taskId('c'), obs({}, {}, false));
    const plan = makePlan(graph, seen, records);
    expect(actions(plan)).toEqual({
      a: 'unchanged: ',
      b: 'drift: output /n/out/b modified outside nodegraph',
      c: 'drift: check failed: not running',
    });
    expect(plan.entries().find((e) => e.id === 'c')?.verb).toBe('restart');
    seen.set(taskId('b'), obs({}, { '/n/out/b': 'missing' }));
    expect(actions(makePlan(graph, seen, records)).b).toBe('drift: output /n/out/b missing');
  });

  test('records the journal kept as text plan as decoded ones do, and an unchanged task is not decoded', () => {
    const scenarios: ((w: ReturnType<typeof appliedChain>) => void)[] = [
      () => {},
      (w) => w.seen.set(taskId('a'), obs({ src: h('2') }, { '/n/out/a': h('a1') })),
      (w) => w.seen.set(taskId('b'), obs({}, { '/n/out/b': h('b2') })),
      (w) => w.seen.set(taskId('b'), obs({}, { '/n/out/b': 'missing' })),
      (w) => w.seen.set(taskId('c'), obs({}, {}, false)),
      (w) => w.records.set(taskId('b'), { ...w.records.get(taskId('b'))!, upstream: { a: h('0ff') } }),
      (w) => w.records.set(taskId('a'), { ...w.records.get(taskId('a'))!, inputs: {} }),
      (w) => w.records.set(taskId('a'), { ...w.records.get(taskId('a'))!, status: 'failed' }),
    ];
    for (const edit of scenarios) {
      const w = appliedChain();
      edit(w);
      const texts = asJournal(w.records);
      const lazy = makePlan(w.graph, w.seen, texts);
      const eager = makePlan(w.graph, w.seen, w.records);
      expect(actions(lazy)).toEqual(actions(eager));
      expect([...lazy.decisions]).toEqual([...eager.decisions]);
      // Parsed: exactly the records of the tasks that are not unchanged.
      const acting = lazy.entries().filter((e) => e.action !== 'unchanged' && w.records.has(e.id)).length;
      expect(texts.decoded).toBe(acting);
    }
  });

  test('an input named like an Object.prototype member is compared as any other', () => {
    const graph = graphOf((ng) => {
      ng.task('a', { inputs: { constructor: ng.file('a.txt'), toString: ng.value(1) }, outputs: ['out/a'], run: ['true'] });
    });
    const seen = new Map([[taskId('a'), obs({ constructor: h('1'), toString: h('2') }, { '/n/out/a': h('a1') })]]);
    const record = recordFor(graph, 'a', obs({}, { '/n/out/a': h('a1') }), {}, h('aa'));
    expect(actions(makePlan(graph, seen, new Map([[taskId('a'), record]]))).a).toBe('update: input constructor added; input toString added');
    const same = recordFor(graph, 'a', seen.get(taskId('a'))!, {}, h('aa'));
    expect(actions(makePlan(graph, seen, new Map([[taskId('a'), same]]))).a).toBe('unchanged: ');
  });

  test('a task may be called __proto__: its dependents see its output as any other', () => {
    const graph = graphOf((ng) => {
      const p = ng.task('__proto__', { outputs: ['out/p'], run: ['true'] });
      ng.task('b', { inputs: { p }, outputs: ['out/b'], run: ['true'] });
    });
    const seen = new Map([
      [taskId('__proto__'), obs({}, { '/n/out/p': h('01') })],
      [taskId('b'), obs({}, { '/n/out/b': h('02') })],
    ]);
    const upstream = JSON.parse('{"__proto__":"' + h('03') + '"}') as Record<string, ContentHash>;
    const records = new Map([
      [taskId('__proto__'), recordFor(graph, '__proto__', seen.get(taskId('__proto__'))!, {}, h('03'))],
      [taskId('b'), recordFor(graph, 'b', seen.get(taskId('b'))!, upstream, h('04'))],
    ]);
    const plan = makePlan(graph, seen, records);
    expect(actions(plan)).toEqual({ ['__proto__']: 'unchanged: ', b: 'unchanged: ' });
    expect(Object.hasOwn(plan.decisions.get(taskId('b'))!.upstream, '__proto__')).toBe(true);
  });

  test('a failed last run says what went wrong then: the first line, cut at 80 characters', () => {
    const said = (error: string | undefined): string => reasonText(lastRunFailed(error));
    expect(said(undefined)).toBe('last run failed');
    expect(said('')).toBe('last run failed');
    expect(said('canceled')).toBe('last run was canceled');
    expect(said('exited with code 3')).toBe('last run failed: exited with code 3');
    expect(lastRunFailed('exited with code 3')).toEqual({ kind: 'last-run-failed', error: 'exited with code 3' });
    expect(said('Error: no route to host\n    at connect (net.js:1:1)')).toBe('last run failed: Error: no route to host');
    const long = said(`declared output ${'x/'.repeat(60)} was not produced`);
    expect(long).toBe(`last run failed: declared output ${'x/'.repeat(31)}x…`);
    expect(long.length).toBe('last run failed: '.length + 80);
  });

  test('a failed last run, a forced task and a changed definition each re-run', () => {
    const { graph, records, seen } = appliedChain();
    records.set(taskId('a'), { ...records.get(taskId('a'))!, status: 'failed' });
    const plan = makePlan(graph, seen, records, { replace: new Set([taskId('c')]) });
    expect(actions(plan)).toMatchObject({ a: 'update: last run failed', b: 'maybe: known after a', c: 'replace: forced by --replace' });
    const edited = graphOf((ng) => {
      const a = ng.task('a', { inputs: { src: ng.file('a.txt') }, outputs: ['out/a'], run: ['cp', '-p', 'a.txt', 'out/a'] });
      const b = ng.task('b', { inputs: { a }, outputs: ['out/b'], run: ['cp', 'out/a', 'out/b'] });
      ng.task('c', { after: [b], run: ['true'], check: ['true'], verbs: { update: 'restart' } });
    });
    const fresh = appliedChain();
    expect(actions(makePlan(edited, fresh.seen, fresh.records)).a).toMatch(/^update: definition changed [0-9a-f]{8}→[0-9a-f]{8}$/);
  });

  test('recorded tasks no longer declared are orphans to destroy, dependents first', () => {
    const { records, seen } = appliedChain();
    const only = graphOf((ng) => {
      ng.task('a', { inputs: { src: ng.file('a.txt') }, outputs: ['out/a'], run: ['cp', 'a.txt', 'out/a'] });
    });
    const plan = makePlan(only, new Map([[taskId('a'), seen.get(taskId('a'))!]]), records);
    expect(plan.entries().map((e) => `${e.id} ${e.action}`)).toEqual(['a unchanged', 'c destroy', 'b destroy']);
    expect(plan.counts.destroy).toBe(2);
  });

  test('targets plan only what they need', () => {
    const { graph, records, seen } = appliedChain();
    const plan = makePlan(graph, seen, records, { targets: new Set([taskId('b')]) });
    expect(plan.entries().map((e) => e.id)).toEqual(['a', 'b']);
  });
});

describe('a plan in columns', () => {
  const entries: PlanEntry[] = [
    { id: taskId('a'), action: 'unchanged', verb: 'unchanged', reasons: [], reasonDetails: [] },
    { id: taskId('svc'), action: 'update', verb: 'restart', reasons: ['input conf changed'], reasonDetails: [{ kind: 'input-changed', input: 'conf', from: '01', to: '02' }] },
    { id: taskId('b'), action: 'maybe', verb: 'may update', reasons: ['known after svc'], reasonDetails: [{ kind: 'known-after', task: 'svc' }] },
    { id: taskId('gone'), action: 'destroy', verb: 'destroy', reasons: ['orphan: no longer in the Nodefile'], reasonDetails: [{ kind: 'orphan' }] },
    { id: taskId('kept'), action: 'destroy', verb: 'stop', reasons: ['orphan: no longer in the Nodefile, stopped and kept in place'], reasonDetails: [{ kind: 'orphan', kept: true }] },
  ];

  test('gives back each entry as it was added, its own verb included, and counts them', () => {
    const plan = listedPlan(entries);
    expect(plan.size).toBe(5);
    expect(plan.entries()).toEqual(entries);
    expect([...plan]).toEqual(entries);
    expect(plan.counts).toEqual({ create: 0, update: 1, replace: 0, drift: 0, maybe: 1, destroy: 1, stop: 1, unchanged: 1 });
    expect(JSON.parse(JSON.stringify(plan))).toEqual({ entries, counts: plan.counts });
  });

  test('keeps no entry objects: each look makes them anew', () => {
    const plan = listedPlan(entries);
    expect(plan.entries()[1]).toEqual(plan.entries()[1]);
    expect(plan.entries()[1]).not.toBe(plan.entries()[1]);
  });
});

describe('teardownOrder', () => {
  test('dependents before what they need, using only recorded edges', () => {
    const { records } = appliedChain();
    expect(teardownOrder([taskId('a'), taskId('b'), taskId('c')], records)).toEqual(['c', 'b', 'a']);
  });
});

describe('verbs', () => {
  test('a verb per upstream names what a task does when only that upstream moved', () => {
    const graph = graphOf((ng) => {
      const config = ng.task('config', { inputs: { v: ng.value(1) }, outputs: ['out/config'], run: ['true'] });
      const container = ng.task('container', { inputs: { v: ng.value(1) }, run: ['true'] });
      ng.task('service', { inputs: { config, container, own: ng.value(1) }, run: ['true'], verbs: { update: 'restart', upstream: { container: 'start' } } });
    });
    const seen = new Map<TaskId, TaskObservation>([
      [taskId('config'), obs({ v: h('1') }, { '/n/out/config': h('c1') })],
      [taskId('container'), obs({ v: h('1') })],
      [taskId('service'), obs({ own: h('1') })],
    ]);
    const records = new Map<TaskId, TaskRecord>([
      [taskId('config'), recordFor(graph, 'config', seen.get(taskId('config'))!, {}, h('cc'))],
      [taskId('container'), recordFor(graph, 'container', seen.get(taskId('container'))!, {}, h('dd'))],
      [taskId('service'), recordFor(graph, 'service', seen.get(taskId('service'))!, { config: h('cc'), container: h('dd') }, h('ee'))],
    ]);
    const verb = (): string | undefined => makePlan(graph, seen, records).entries().find((e) => e.id === 'service')?.verb;
    seen.set(taskId('container'), obs({ v: h('2') }));
    expect(verb()).toBe('may start');
    seen.set(taskId('config'), obs({ v: h('2') }, { '/n/out/config': h('c1') }));
    expect(verb()).toBe('may restart'); // the config moved too: a restart, not just a start
    seen.set(taskId('config'), obs({ v: h('1') }, { '/n/out/config': h('c1') }));
    seen.set(taskId('service'), obs({ own: h('2') }));
    expect(verb()).toBe('restart'); // its own input changed
  });
});
