// Every JSON format nodegraph writes, checked against the schema the package
// ships (schemas/), on real output: plan, the events, explain, status, unlock,
// generations, graph, and the error lines.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { repo, Rig } from '../support/rig.ts';
import { schema, schemaDir as dir, valid } from '../support/schemas.ts';

const lines = (text: string): unknown[] => text.trim().split('\n').map((l) => JSON.parse(l) as unknown);

let rig: Rig;
beforeAll(() => {
  rig = new Rig();
});
afterAll(() => rig.cleanup());

test('the package ships the schemas', () => {
  const pkg = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { files: string[] };
  expect(pkg.files).toContain('schemas/');
  expect(readdirSync(dir).sort()).toEqual([
    'common.schema.json',
    'events.schema.json',
    'explain.schema.json',
    'generations.schema.json',
    'graph.schema.json',
    'plan.schema.json',
    'status.schema.json',
    'unlock.schema.json',
  ]);
});

test('real output of every format validates, whatever its reasons and outcomes', async () => {
  const graph = (level: string, extra = ''): void => {
    rig.nodefile(`
      const conf = ng.task('conf', { inputs: { settings: ng.value({ logLevel: '${level}', mirrors: ['a'] }), token: ng.env('TOKEN') }, outputs: ['out/conf'], run: { shell: 'echo x > out/conf' } });
      const same = ng.task('same', { inputs: { conf }, outputs: ['out/same'], run: { shell: 'echo fixed > out/same' } });
      ng.task('svc', { inputs: { same }, run: ['true'], check: ['test', '-f', 'out/conf'], stop: ['true'] });
      ng.task('bad', { inputs: { conf }, run: { shell: 'echo boom >&2; exit 7' } });
      ng.task('after-bad', { inputs: { bad: ng.ref('bad') }, run: ['true'] });
      ${extra}
    `);
  };
  graph('info', `ng.task('old', { run: ['true'] });`);
  const first = await rig.run(['apply', '-k', '--json'], { TOKEN: 'one' });
  expect(first.code).toBe(1);
  const events = lines(first.stdout) as { type: string; outcome?: string; exitCode?: number; time: string }[];
  for (const e of events) valid('events', e);
  expect(events.find((e) => e.outcome === 'failed')!.exitCode).toBe(7);
  expect(events.map((e) => e.outcome).filter(Boolean)).toEqual(expect.arrayContaining(['ran', 'failed', 'skipped']));

  graph('debug', `ng.task('later', { after: ['svc'], run: ['true'] });`);
  const plan = await rig.run(['plan', '--json'], { TOKEN: 'two' });
  const planDoc = JSON.parse(plan.stdout) as { entries: { id: string; action: string }[] };
  valid('plan', planDoc);
  expect(new Set(planDoc.entries.map((e) => e.action))).toEqual(new Set(['update', 'maybe', 'create', 'destroy']));

  const second = await rig.run(['apply', '--json'], { TOKEN: 'two' });
  const outcomes = lines(second.stdout) as { type: string; outcome?: string }[];
  for (const e of outcomes) valid('events', e);
  expect(outcomes.map((e) => e.type)).toEqual(expect.arrayContaining(['destroy-start', 'destroy-done', 'summary']));
  expect(outcomes.some((e) => e.outcome === 'up-to-date')).toBe(true);

  // The graph, whole, of some targets, and with each task's status; edges of both kinds.
  for (const args of [['graph', '--format', 'json'], ['graph', '--format', 'json', 'svc'], ['graph', '--format', 'json', '--status']]) {
    const doc = JSON.parse((await rig.run(args, { TOKEN: 'two' })).stdout) as { tasks: { status?: string }[]; edges: { kind: string }[] };
    valid('graph', doc);
    if (args.includes('--status')) expect(doc.tasks.every((t) => t.status !== undefined)).toBe(true);
    if (args.length === 3) expect(new Set(doc.edges.map((e) => e.kind))).toEqual(new Set(['input', 'after']));
  }

  const explain = await rig.run(['explain', 'bad', '--json'], { TOKEN: 'two' });
  valid('explain', JSON.parse(explain.stdout));
  valid('status', JSON.parse((await rig.run(['status', '--json'], { TOKEN: 'two' })).stdout));
  for (const e of lines((await rig.run(['stop', '--json'])).stdout)) valid('events', e);
  for (const e of lines((await rig.run(['destroy', '--yes', '--json'])).stdout)) valid('events', e);

  // An atomic apply's plan and its transaction events.
  rig.nodefile(`ng.task('ok', { run: ['true'] });`);
  valid('plan', JSON.parse((await rig.run(['plan', '--json', '--atomic'])).stdout));
  const atomic = lines((await rig.run(['apply', '--json', '--atomic'])).stdout) as { type: string }[];
  for (const e of atomic) valid('events', e);
  expect(atomic.map((e) => e.type)).toContain('transaction');

  // The generations: none yet is a document too; then applied ones, with what changed.
  const generations = JSON.parse((await rig.run(['generations', '--json'])).stdout) as { generations: unknown[]; current: number | null };
  valid('generations', generations);
  expect(generations.generations.length).toBeGreaterThan(0);
  rig.nodefile(`ng.task('ok', { inputs: { token: ng.env('TOKEN') }, run: ['true'] });`);
  expect((await rig.run(['apply'], { TOKEN: 'three' })).code).toBe(0);
  const more = JSON.parse((await rig.run(['generations', '--json'])).stdout) as { generations: { env: string[] }[] };
  valid('generations', more);
  expect(more.generations.at(-1)!.env).toEqual(['TOKEN']);
  // A rollback's events, and nothing else on stdout.
  const back = await rig.run(['rollback', '--json'], { TOKEN: 'three' });
  expect(back.code).toBe(0);
  for (const e of lines(back.stdout)) valid('events', e);
  expect(back.stderr).toMatch(/^Generation \d+ is current\.\n$/);

  valid('unlock', JSON.parse((await rig.run(['unlock', '--json'])).stdout));
  rig.write('.nodegraph/lock', `${JSON.stringify({ pid: 999999, host: 'elsewhere.example', command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z', token: 't' })}\n`);
  const status = JSON.parse((await rig.run(['status', '--json'])).stdout) as { lock: unknown };
  valid('status', status);
  expect(status.lock).toEqual({ state: 'elsewhere', holder: { pid: 999999, host: 'elsewhere.example', command: 'nodegraph apply', startedAt: '2026-01-01T00:00:00.000Z' } });
  const removed = JSON.parse((await rig.run(['unlock', '--json'])).stdout) as { removed: boolean };
  expect(removed.removed).toBe(true);
  valid('unlock', removed);

  for (const args of [['aply', '--json'], ['plan', 'no/such', '--json'], ['status', '--json', '-j']]) {
    const failed = await rig.run(args);
    expect(failed.code).toBe(1);
    for (const e of lines(failed.stdout)) valid('events', e);
  }
});

test('stop and destroy --json with nothing recorded: stdout is the events alone', async () => {
  const empty = new Rig();
  try {
    empty.nodefile(`ng.task('a', { run: ['true'] });`);
    for (const args of [['stop', '--json'], ['destroy', '--yes', '--json']]) {
      const result = await empty.run(args);
      expect(result.code).toBe(0);
      const events = lines(result.stdout) as { type: string }[];
      for (const e of events) valid('events', e);
      expect(events.map((e) => e.type)).toEqual(['summary']);
      expect(result.stderr).toBe(`Nothing to ${args[0]}: the state records no task.\n`);
    }
  } finally {
    empty.cleanup();
  }
});

test('a schema rejects what breaks it: a missing time, a prose-only reason, a spelling of its own', () => {
  const event = { v: 1, type: 'task-done', time: '2026-12-05T00:00:00.000Z', id: 'a', outcome: 'up-to-date', durationMs: 0 };
  valid('events', event);
  const { time: _time, ...untimed } = event;
  expect(schema('events')(untimed)).toBe(false);
  expect(schema('events')({ ...event, outcome: 'up to date' })).toBe(false);
  const summary = { v: 1, type: 'summary', time: event.time, command: 'apply', counts: { 'up to date': 1 }, durationMs: 3 };
  expect(schema('events')(summary)).toBe(false);
  const entry = { id: 'a', action: 'create', verb: 'create', reasons: ['never ran'] };
  expect(schema('plan')({ format: 'nodegraph-plan-json', version: 1, entries: [entry], counts: { create: 1, update: 0, replace: 0, drift: 0, maybe: 0, destroy: 0, stop: 0, unchanged: 0 } })).toBe(false);
  const task = { id: 'a', namespace: '', needs: [], after: [], outputs: [] };
  valid('graph', { format: 'nodegraph-graph', version: 1, tasks: [task], edges: [] });
  expect(schema('graph')({ format: 'nodegraph-graph', version: 1, tasks: [{ ...task, status: 'up to date' }], edges: [] })).toBe(false);
  expect(schema('graph')({ format: 'nodegraph-graph', version: 1, tasks: [task], edges: [{ from: 'a', to: 'b', kind: 'after', inputs: ['x'] }] })).toBe(false);
  const generation = { number: 1, createdAt: '2026-12-05T00:00:00.000Z', status: 'applied', files: [], env: [], ran: [], destroyed: [] };
  const list = { format: 'nodegraph-generations', version: 1, current: 1, transaction: null, transactionHolder: null, generations: [generation], damaged: [] };
  valid('generations', list);
  expect(schema('generations')({ ...list, generations: [{ ...generation, status: 'rolled back' }] })).toBe(false);
  expect(schema('generations')({ ...list, current: undefined })).toBe(false);
  valid('generations', { ...list, damaged: [{ number: 2, path: '/n/.nodegraph/generations/2.json', message: 'its manifest is not whole' }] });
  expect(schema('generations')({ ...list, damaged: [{ number: 2, message: 'its manifest is not whole' }] })).toBe(false);
});
