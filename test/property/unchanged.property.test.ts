// The planner's shortcut (plan/unchanged.ts) against `decide`, over random
// records and observations: the shortcut says "unchanged" only when decide
// does, with the record's own output hash; and for a record exactly as a run
// writes it, it does say so whenever JSON keeps the keys in the order written.
// The record goes through the real journal: encoded, decoded, kept as text.

import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { TaskNode } from '../../src/graph/graph.ts';
import { contentHash, taskId, type ContentHash, type TaskId } from '../../src/ids.ts';
import { decide, type TaskObservation, type UpstreamState } from '../../src/plan/decide.ts';
import { unchangedOutputHash } from '../../src/plan/unchanged.ts';
import { decodeJournal, encodeLine } from '../../src/state/journal.ts';
import { canonical, type TaskRecord } from '../../src/state/record.ts';
import { RecordMap } from '../../src/state/records.ts';

const hex = fc.stringMatching(/^[0-9a-f]{64}$/).map((s) => contentHash(s));
// A few hashes, so that a mutation often lands on an equal value.
const hash = fc.oneof(fc.constantFrom(...['0', '1', '2'].map((c) => contentHash(c.repeat(64)))), hex);
// Names JSON orders differently ('0', '12'), escapes ('a"b', '\\'), or that are special to objects.
const name = fc.oneof(
  fc.constantFrom('src', 'header', '__proto__', 'constructor', '0', '12', '4294967295', 'a"b', 'c\\d', 'é', '\u2028', 'x y', 'lone\ud800', 'tab\t'),
  fc.string({ minLength: 1, maxLength: 6 }),
);
const pathName = fc.oneof(fc.constantFrom('/n/out/a', '/n/out/b', '/n/"q"', '/n/\\x', '/n/é'), name.map((n) => `/n/${n}`));
const id = fc.oneof(fc.constantFrom('a', 'cp/leaf1', 'x.y', '__proto__', 'constructor', '0', '7'), fc.stringMatching(/^[a-z][a-z0-9/_-]{0,8}$/));

const pairs = <K extends string>(key: fc.Arbitrary<K>) => fc.uniqueArray(fc.tuple(key, hash), { maxLength: 4, selector: ([k]) => k });

interface Case {
  id: string;
  definition: ContentHash;
  inputs: [string, ContentHash][];
  needs: [string, ContentHash][];
  outputs: [string, ContentHash][];
  outputHash: ContentHash;
  check: boolean | undefined;
  edit: number;
  editHash: ContentHash;
  editName: string;
}

const caseOf = fc.record<Case>({
  id,
  definition: hash,
  inputs: pairs(name),
  needs: pairs(id.filter((n) => n !== 'a')),
  outputs: pairs(pathName),
  outputHash: hash,
  check: fc.constantFrom(undefined, true, false),
  edit: fc.integer({ min: 0, max: 12 }),
  editHash: hash,
  editName: name,
});

/** The record a run writes, the observation and upstream of now (edited by `edit`), and the node. */
function world(c: Case) {
  const record: TaskRecord = {
    v: 1,
    id: taskId(c.id),
    status: 'ok',
    fingerprint: contentHash('f'.repeat(64)),
    definition: c.definition,
    inputs: Object.fromEntries(c.inputs),
    upstream: Object.fromEntries(c.needs),
    outputs: Object.fromEntries(c.outputs),
    outputHash: c.outputHash,
    edges: { needs: c.needs.map(([n]) => taskId(n)), after: [] },
    recipe: { cwd: '/n', remove: [], destroy: [], stop: [] },
    startedAt: '2026-12-01T00:00:00.000Z',
    durationMs: 3,
  };
  let definition = c.definition;
  const inputs = new Map(c.inputs);
  const needs = new Map(c.needs);
  const outputs = new Map<string, ContentHash | 'missing'>(c.outputs);
  const first = <T,>(m: Map<string, T>): string | undefined => m.keys().next().value;
  switch (c.edit) {
    case 1: definition = c.editHash; break;
    case 2: if (first(inputs) !== undefined) inputs.set(first(inputs)!, c.editHash); break;
    case 3: if (first(inputs) !== undefined) inputs.delete(first(inputs)!); break;
    case 4: inputs.set(c.editName, c.editHash); break;
    case 5: if (first(needs) !== undefined) needs.set(first(needs)!, c.editHash); break;
    case 6: if (first(needs) !== undefined) needs.delete(first(needs)!); break;
    case 7: if (first(outputs) !== undefined) outputs.set(first(outputs)!, c.editHash); break;
    case 8: if (first(outputs) !== undefined) outputs.set(first(outputs)!, 'missing'); break;
    case 9: outputs.set(`/n/${c.editName}`, c.editHash); break;
    case 10: { // the same pairs, inserted in another order
      const back = [...inputs].reverse();
      inputs.clear();
      for (const [k, v] of back) inputs.set(k, v);
      break;
    }
    default: break; // 0, 11, 12: as recorded
  }
  const node = { id: taskId(c.id), needs: [...needs.keys()].map(taskId), after: [], outputs: [...outputs.keys()] } as unknown as TaskNode;
  const observation: TaskObservation = { inputs, outputs, ...(c.check === undefined ? {} : { check: { ok: c.check, detail: '' } }) };
  const upstreamOf = (up: TaskId): UpstreamState => ({ settled: true, outputHash: needs.get(up)!, ran: false });
  return { record, definition, observation, node, upstream: [...needs.values()], upstreamOf };
}

/** The record's text as the journal keeps it, or undefined when the journal decodes it at once. */
function textOf(record: TaskRecord): string | undefined {
  const buf = Buffer.concat([encodeLine({ format: 'nodegraph-state', version: 1 }), encodeLine(canonical(record))]);
  const decoded = decodeJournal(buf, 'state.jsonl');
  if (!decoded.ok || !(decoded.value.records instanceof RecordMap)) throw new Error('decode failed');
  return decoded.value.records.textOf(record.id);
}

const indexLike = (k: string): boolean => /^(0|[1-9][0-9]*)$/.test(k) && Number(k) < 2 ** 32 - 1;

describe('the planner shortcut', () => {
  test('says unchanged only when decide does, and whenever a record is exactly what a run writes', () => {
    let matched = 0;
    fc.assert(
      fc.property(caseOf, (c) => {
        const w = world(c);
        const text = textOf(w.record);
        expect(text).toBeDefined(); // these ids need no escape
        const fast = unchangedOutputHash(text!, w.node, w.definition, w.observation, w.upstream);
        const slow = decide(w.node, () => w.definition, w.observation, w.record, w.upstreamOf, false);
        if (fast !== undefined) {
          matched++;
          expect(slow.action).toBe('unchanged');
          expect(fast).toBe(w.record.outputHash);
        }
        const asWritten = c.edit === 0 || c.edit === 11 || c.edit === 12;
        const keysInOrder = ![...c.inputs, ...c.needs, ...c.outputs].some(([k]) => indexLike(k));
        if (asWritten && keysInOrder && c.check !== false) expect(fast).toBe(w.record.outputHash);
      }),
      { numRuns: 3000 },
    );
    expect(matched).toBeGreaterThan(100);
  });
});
