// The state journal, record validation and the in-memory store, on real temp dirs.

import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { contentHash, taskId, type ContentHash } from '../../src/ids.ts';
import {
  acquire,
  checkRecord,
  decodeJournal,
  encodeLine,
  frame,
  JOURNAL_FILE,
  memoryStore,
  openJournal,
  type Appended,
  readState,
  type JournalOptions,
  type JournalStore,
  type Lock,
  type StoredRecord,
  type TaskRecord,
  openState,
  outputsDigest,
} from '../../src/state/index.ts';
import { RecordTable } from '../../src/state/records.ts';

const h = (s: string): ContentHash => contentHash(createHash('sha256').update(s).digest('hex'));

function rec(id: string, n = 0, extra: Partial<TaskRecord> = {}): TaskRecord {
  return {
    v: 1,
    id: taskId(id),
    status: 'ok',
    fingerprint: h(`fp ${id} ${n}`),
    definition: h(`def ${id}`),
    inputs: { 'config.toml': h(`in ${id} ${n}`) },
    upstream: {},
    outputs: { [`/etc/${id}.conf`]: h(`out ${id} ${n}`) },
    outputHash: h(`oh ${id} ${n}`),
    edges: { needs: [], after: [] },
    recipe: { cwd: '/srv', remove: [`/etc/${id}.conf`], destroy: [], stop: [['systemctl', 'stop', id]] },
    startedAt: '2026-11-29T08:00:00.000Z',
    durationMs: n,
    ...extra,
  };
}
const tomb = (id: string): StoredRecord => ({ v: 1, id: taskId(id), deleted: true });

let dir: string;
let lock: Lock | undefined;
const opened: JournalStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodegraph-state-'));
});
afterEach(() => {
  for (const j of opened.splice(0)) j.close();
  lock?.release();
  lock = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const file = (): string => join(dir, JOURNAL_FILE);

function open(options: JournalOptions = {}): JournalStore {
  if (lock === undefined || !lock.isHeld()) {
    const l = acquire(dir, { command: 'test' });
    if (!l.ok) throw new Error(JSON.stringify(l.error));
    lock = l.value;
  }
  const j = openJournal(lock, options);
  if (!j.ok) throw new Error(JSON.stringify(j.error));
  opened.push(j.value);
  return j.value;
}

function load(j: JournalStore) {
  const r = j.load();
  if (!r.ok) throw new Error(JSON.stringify(r.error));
  return r.value;
}

function readOnly() {
  const r = readState(dir);
  if (!r.ok) throw new Error(JSON.stringify(r.error));
  return r.value;
}

describe('journal', () => {
  test('round-trips records exactly, with a header line first', () => {
    const j = open();
    const a = rec('a', 1, { error: undefined });
    const b = rec('b', 2, {
      status: 'failed',
      error: 'exit 1: ünïcödé ☃',
      upstream: { a: h('x') },
      edges: { needs: [taskId('a')], after: [] },
      recipe: { cwd: '/', remove: [], destroy: [['rm', '-rf', '/tmp/x']], stop: [], env: { A: '1' } },
    });
    expect(j.append(a).ok).toBe(true);
    expect(j.append(b).ok).toBe(true);
    expect(j.sync().ok).toBe(true);

    const loaded = load(j);
    expect(loaded.warnings).toEqual([]);
    const { error: _drop, ...aWithoutUndefined } = a;
    expect(loaded.records.get(taskId('a'))).toEqual(aWithoutUndefined);
    expect(loaded.records.get(taskId('b'))).toEqual(b);
    expect(loaded.stats).toMatchObject({ lines: 2, dropped: 0, live: 2 });
    expect([...readOnly().records.entries()]).toEqual([...loaded.records.entries()]);

    const lines = readFileSync(file(), 'utf8').split('\n');
    expect(lines[0]).toMatch(/^[0-9a-f]{8} \{"format":"nodegraph-state","version":3\}$/);
    // Status, fingerprint, output hash, outputs digest, id, then the rest as JSON.
    expect(lines[1]).toMatch(/^[0-9a-f]{8} o( [0-9a-f]{64}){3} a \{"definition":"sha256:/);
    expect(lines[2]).toMatch(/^[0-9a-f]{8} f( [0-9a-f]{64}){3} b \{/);
    expect(lines).toHaveLength(4); // header, a, b, '' after the final newline
  });

  test('the last record per id wins and tombstones delete', () => {
    const j = open();
    j.append(rec('a', 1));
    j.append(rec('b', 1));
    j.append(rec('a', 2));
    j.append(rec('c', 1));
    j.append(tomb('b'));
    j.append(rec('c', 2));
    j.append(tomb('c'));
    j.append(tomb('never-existed'));
    const { records, warnings } = load(j);
    expect(warnings).toEqual([]);
    expect([...records.keys()]).toEqual(['a']);
    expect(records.get(taskId('a'))?.durationMs).toBe(2);
    j.append(rec('b', 3)); // recreated after its tombstone
    expect(load(j).records.get(taskId('b'))?.durationMs).toBe(3);
  });

  test('a missing journal is empty state; readState writes nothing', () => {
    const s = readOnly();
    expect(s.records.size).toBe(0);
    expect(existsSync(file())).toBe(false);
    const missingDir = readState(join(dir, 'nope', 'deeper'));
    expect(missingDir.ok && missingDir.value.records.size).toBe(0);
  });

  test('a journal is made by its first record: opened, loaded, synced, tidied and closed with none, no file is left', () => {
    const j = open();
    expect(load(j).records.size).toBe(0);
    expect(j.sync().ok).toBe(true);
    expect(j.tidy(0).ok).toBe(true);
    expect(existsSync(file())).toBe(false);
    expect(j.append(rec('a', 1)).ok).toBe(true);
    expect(readFileSync(file(), 'utf8')).toMatch(/^[0-9a-f]{8} \{"format":"nodegraph-state","version":3\}\n[0-9a-f]{8} o /);
    expect([...load(j).records.keys()]).toEqual(['a']);
    j.close();
    expect([...readOnly().records.keys()]).toEqual(['a']);
  });

  test('append refuses (throws) a malformed record instead of writing it', () => {
    const j = open();
    const bad = { ...rec('a'), fingerprint: 'sha256:xyz' } as unknown as TaskRecord;
    expect(() => j.append(bad)).toThrow(/invalid state record for a: fingerprint/);
    expect(() => j.append({ ...rec('a'), extra: 1 } as unknown as TaskRecord)).toThrow(/unexpected keys/);
    expect(load(j).stats.lines).toBe(0);
  });

  test('a record mutated after append is not changed in the journal', () => {
    const j = open();
    const a = rec('a', 1);
    j.append(a);
    a.outputs['/etc/other'] = h('changed');
    a.edges.needs.push(taskId('z'));
    expect(load(j).records.get(taskId('a'))).toEqual(rec('a', 1));
  });

  test('a torn last line is dropped with a warning and the next append starts a fresh line', () => {
    const j = open();
    j.append(rec('a', 1));
    j.append(rec('b', 1));
    j.append(rec('a', 2));
    j.close();
    lock?.release();
    lock = undefined;
    // Cut the last record in half, as a crash mid-write would.
    const size = readFileSync(file()).length;
    truncateSync(file(), size - 150);

    const before = readOnly();
    expect(before.warnings.map((w) => w.kind)).toEqual(['torn-line', 'distrusted']);
    expect(before.warnings[0]).toMatchObject({ line: 4, id: 'a' });
    expect(before.records.get(taskId('b'))?.status).toBe('ok');
    // a's newest record was lost: its previous one is not trusted as applied.
    expect(before.records.get(taskId('a'))).toMatchObject({ status: 'failed', durationMs: 1 });

    const j2 = open();
    j2.append(rec('c', 1));
    j2.append(rec('a', 3));
    const after = load(j2);
    expect(after.records.get(taskId('c'))).toEqual(rec('c', 1));
    expect(after.records.get(taskId('a'))).toEqual(rec('a', 3)); // a newer good record supersedes the lost one
    // The torn bytes stay as a line of their own (now newline-terminated) until the run's tidy() compacts.
    expect(after.warnings.map((w) => w.kind)).toEqual(['corrupt-line']);
    expect(after.warnings[0]?.message).toMatch(/line 4: checksum mismatch \(corrupted, or cut off by an earlier crash\)/);
    const lines = readFileSync(file(), 'utf8').split('\n');
    expect(lines[4]).toMatch(/^[0-9a-f]{8} o( [0-9a-f]{64}){3} c /);
  });

  test('a last line that lost only its newline is kept, and terminated before the next append', () => {
    const j = open();
    j.append(rec('a', 1));
    j.close();
    lock?.release();
    lock = undefined;
    truncateSync(file(), readFileSync(file()).length - 1);
    expect(readOnly().records.get(taskId('a'))).toEqual(rec('a', 1));
    expect(readOnly().warnings).toEqual([]);
    const j2 = open();
    j2.append(rec('b', 1));
    const s = load(j2);
    expect(s.warnings).toEqual([]);
    expect([...s.records.keys()]).toEqual(['a', 'b']);
  });

  test('a corrupted middle line (one flipped byte) is dropped with a warning, the others kept', () => {
    const j = open();
    for (const id of ['a', 'b', 'c', 'd']) j.append(rec(id, 1));
    const bytes = readFileSync(file());
    const lines = bytes.toString('utf8').split('\n');
    const third = lines.slice(0, 3).join('\n').length + 1; // start of line 4 (record c)
    bytes[third + 40] = bytes[third + 40]! ^ 0x01;
    writeFileSync(file(), bytes);

    const s = load(j);
    expect([...s.records.keys()].sort()).toEqual(['a', 'b', 'd']);
    expect(s.records.get(taskId('a'))).toEqual(rec('a', 1));
    expect(s.warnings).toHaveLength(2);
    expect(s.warnings[0]).toMatchObject({ kind: 'corrupt-line', line: 4, id: 'c' });
    expect(s.warnings[1]).toMatchObject({ kind: 'distrusted', id: 'c' });
    expect(s.stats).toMatchObject({ lines: 4, dropped: 1, live: 3 });
  });

  test('a corrupted line for a task with an earlier good record keeps that record only as failed', () => {
    const j = open();
    j.append(rec('a', 1));
    j.append(rec('a', 2));
    const bytes = readFileSync(file());
    bytes[bytes.length - 20] = bytes[bytes.length - 20]! ^ 0x20; // inside the last record
    writeFileSync(file(), bytes);
    const a = load(j).records.get(taskId('a'));
    expect(a).toMatchObject({ status: 'failed', durationMs: 1 });
    expect(a?.error).toMatch(/line 3 was unreadable/);
  });

  test('a corrupted old line superseded by a good newer one only warns', () => {
    const j = open();
    j.append(rec('a', 1));
    j.append(rec('a', 2));
    const bytes = readFileSync(file());
    const second = bytes.indexOf(0x0a) + 1;
    bytes[second + 30] = bytes[second + 30]! ^ 0x04;
    writeFileSync(file(), bytes);
    const s = load(j);
    expect(s.records.get(taskId('a'))).toEqual(rec('a', 2));
    expect(s.warnings.map((w) => w.kind)).toEqual(['corrupt-line']);
  });

  test('a line with a good checksum but an invalid record is dropped with a warning', () => {
    open().append(rec('a', 1));
    const bad = frame(JSON.stringify({ ...rec('b', 1), status: 'maybe' }));
    writeFileSync(file(), Buffer.concat([readFileSync(file()), bad]));
    const s = readOnly();
    expect([...s.records.keys()]).toEqual(['a']);
    expect(s.warnings[0]).toMatchObject({ kind: 'invalid-record', line: 3, id: 'b' });
    expect(s.warnings[0]?.message).toMatch(/status/);
  });

  test('a journal written by a newer format version is refused, not dropped or touched', () => {
    const newer = Buffer.concat([frame(JSON.stringify({ format: 'nodegraph-state', version: 4 })), frame(JSON.stringify({ v: 2, id: 'a' }))]);
    writeFileSync(file(), newer);
    const r = readState(dir);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toMatchObject({ reason: 'state-unreadable', kind: 'newer-format', found: 4, supported: 3 });
      expect(r.error.message).toMatch(/newer nodegraph/);
    }
    const l = acquire(dir);
    if (!l.ok) throw new Error('lock');
    lock = l.value;
    const j = openJournal(lock);
    expect(j.ok).toBe(false);
    if (!j.ok) expect(j.error).toMatchObject({ reason: 'state-unreadable', kind: 'newer-format' });
    expect(readFileSync(file())).toEqual(newer);
  });

  test('a record of a newer version in a v1 journal is refused too', () => {
    open().append(rec('a', 1));
    writeFileSync(file(), Buffer.concat([readFileSync(file()), frame(JSON.stringify({ v: 3, id: 'b', whatever: true }))]));
    const r = readState(dir);
    expect(!r.ok && r.error.kind).toBe('newer-format');
  });

  test('a file that is not a journal is refused and left alone', () => {
    writeFileSync(file(), 'hello\nworld\n');
    expect(readState(dir)).toMatchObject({ ok: false, error: { reason: 'state-unreadable', kind: 'bad-header' } });
    writeFileSync(file(), 'no newline at all, but not a header either');
    expect(readState(dir)).toMatchObject({ ok: false, error: { kind: 'bad-header' } });
    const l = acquire(dir);
    if (!l.ok) throw new Error('lock');
    lock = l.value;
    expect(openJournal(lock).ok).toBe(false);
    expect(readFileSync(file(), 'utf8')).toBe('no newline at all, but not a header either');
  });

  test('a torn header (crash while creating the journal) is empty state and is rewritten', () => {
    const header = frame(JSON.stringify({ format: 'nodegraph-state', version: 2 }));
    writeFileSync(file(), header.subarray(0, 20));
    const s = readOnly();
    expect(s.records.size).toBe(0);
    expect(s.warnings.map((w) => w.kind)).toEqual(['torn-header']);
    const j = open();
    j.append(rec('a', 1));
    const after = load(j);
    expect(after.warnings).toEqual([]);
    expect([...after.records.keys()]).toEqual(['a']);
    // An empty journal file is empty state too (a crash right after creating it, or a file
    // emptied since: a journal is made with its header), and a warning says it.
    writeFileSync(file(), '');
    expect(readOnly().records.size).toBe(0);
    expect(readOnly().warnings.map((w) => w.kind)).toEqual(['empty-journal']);
  });

  test('openJournal requires the lock to still be held', () => {
    const l = acquire(dir);
    if (!l.ok) throw new Error('lock');
    l.value.release();
    const j = openJournal(l.value);
    expect(j.ok).toBe(false);
    if (!j.ok) expect(j.error.reason).toBe('locked');
  });
});

describe('compaction', () => {
  test('compaction keeps exactly the live records, one line each', () => {
    const j = open({ compactWhen: () => false });
    for (let n = 0; n < 5; n++) for (const id of ['a', 'b', 'c']) j.append(rec(id, n));
    j.append(tomb('b'));
    const before = load(j);
    const c = j.compact();
    expect(c.ok).toBe(true);
    if (c.ok) expect(c.value).toMatchObject({ linesBefore: 16, live: 2 });
    const after = load(j);
    expect([...after.records.entries()]).toEqual([...before.records.entries()]);
    expect(after.stats.lines).toBe(2);
    expect(readFileSync(file(), 'utf8').trimEnd().split('\n')).toHaveLength(3);
    // Appends after compaction go to the new file.
    j.append(rec('d', 1));
    expect([...readOnly().records.keys()]).toEqual(['a', 'c', 'd']);
    expect(readdirSync(dir).filter((n) => n.includes('compact'))).toEqual([]);
  });

  test('tidy compacts past the threshold (default: more than 2 × live + 1000 lines), and only then', () => {
    const j = open();
    for (let n = 0; n < 1000; n++) j.append(rec('a', n));
    expect(j.tidy(1)).toEqual({ ok: true, value: undefined });
    for (let n = 1000; n < 1003; n++) j.append(rec('a', n));
    const t = j.tidy(1);
    expect(t.ok && t.value).toMatchObject({ linesBefore: 1003, live: 1 });
    expect(load(j).stats).toMatchObject({ lines: 1 });
    expect(load(j).records.get(taskId('a'))?.durationMs).toBe(1002);
  });

  test('a damaged line warns once: the run that found it compacts, and its verdict is kept as a failed record', () => {
    const j = open({ compactWhen: () => false });
    j.append(rec('a', 1));
    j.append(rec('a', 2));
    truncateSync(file(), readFileSync(file()).length - 100);
    j.close();
    lock?.release();
    lock = undefined;
    const j2 = open({ compactWhen: () => false });
    const s = load(j2);
    // Opening it for appends terminated the torn line: now a corrupt one.
    expect(s.warnings.map((w) => w.kind)).toEqual(['corrupt-line', 'distrusted']);
    expect(s.records.get(taskId('a'))?.status).toBe('failed');
    const t = j2.tidy(s.records.size);
    expect(t.ok && t.value).toMatchObject({ live: 1 });
    const after = readOnly();
    expect(after.warnings).toEqual([]);
    expect(after.records.get(taskId('a'))).toMatchObject({ status: 'failed', durationMs: 1 });
    expect(load(j2).warnings).toEqual([]);
  });

  test('a v1 journal is read, and rewritten in this format before the first append', () => {
    const v1 = (r: StoredRecord): Buffer => frame(JSON.stringify(r));
    const old = Buffer.concat([frame(JSON.stringify({ format: 'nodegraph-state', version: 1 })), v1(rec('a', 1)), v1(rec('b', 1)), v1(tomb('b'))]);
    writeFileSync(file(), old);
    expect(readOnly().records.get(taskId('a'))).toEqual(rec('a', 1));
    expect(readFileSync(file())).toEqual(old);
    const j = open();
    expect(load(j).records.get(taskId('a'))).toEqual(rec('a', 1));
    j.append(rec('c', 1));
    const lines = readFileSync(file(), 'utf8').trimEnd().split('\n');
    expect(lines[0]).toMatch(/"version":3/);
    expect(lines.slice(1).map((l) => l.split(' ')[5])).toEqual(['a', 'c']);
    expect([...readOnly().records.entries()]).toEqual([['a', rec('a', 1)], ['c', rec('c', 1)]]);
  });

  test('a version 2 journal is read, and rewritten as version 3 before a record with values goes in; values come back as written', () => {
    const old = Buffer.concat([frame(JSON.stringify({ format: 'nodegraph-state', version: 2 })), encodeLine(rec('a', 1))]);
    writeFileSync(file(), old);
    expect(readOnly().records.get(taskId('a'))).toEqual(rec('a', 1));
    const j = open();
    load(j);
    const valued = rec('c', 1, { values: { settings: { logLevel: 'info', mirrors: ['ä', null] } } });
    j.append(valued);
    expect(readFileSync(file(), 'utf8').split('\n')[0]).toMatch(/"version":3/);
    expect([...readOnly().records.entries()]).toEqual([['a', rec('a', 1)], ['c', valued]]);
  });

  test('a temp file left by a crash mid-compaction does not affect loading and is swept by the next writer', () => {
    const j = open({ compactWhen: () => false });
    j.append(rec('a', 1));
    j.append(rec('b', 1));
    j.close();
    lock?.release();
    lock = undefined;
    const leftover = join(dir, `${JOURNAL_FILE}.compact-12345-deadbeef.tmp`);
    writeFileSync(leftover, frame(JSON.stringify({ format: 'nodegraph-state', version: 2 })).toString() + 'garbage half wri');
    expect([...readOnly().records.keys()]).toEqual(['a', 'b']);
    expect(readOnly().warnings).toEqual([]);
    const j2 = open();
    expect(existsSync(leftover)).toBe(false);
    expect([...load(j2).records.keys()]).toEqual(['a', 'b']);
  });
});

describe('decodeJournal', () => {
  test('keepEntries lists every accepted record in file order', () => {
    const j = open();
    j.append(rec('a', 1));
    j.append(tomb('a'));
    const d = decodeJournal(readFileSync(file()), file(), { keepEntries: true });
    expect(d.ok && d.value.entries?.map((e) => [e.line, e.record.id])).toEqual([
      [2, 'a'],
      [3, 'a'],
    ]);
  });
});

/** What a table says of a task's fixed fields without reading its record whole: status, output hash, and whether fingerprint and outputs digest are `like`'s. */
const fixedFields = (table: RecordTable, id: string, like: TaskRecord) => [
  table.status(taskId(id)),
  table.outputHash(taskId(id)),
  table.holds(taskId(id), 'fingerprint', like.fingerprint),
  table.holds(taskId(id), 'outputs', outputsDigest(Object.entries(like.outputs))),
];

describe('records in dense arrays (RecordTable)', () => {
  const journalOf = (...records: StoredRecord[]): Buffer =>
    Buffer.concat([frame(JSON.stringify({ format: 'nodegraph-state', version: 2 })), ...records.map((r) => encodeLine(r))]);
  const decoded = (buf: Buffer) => {
    const d = decodeJournal(buf, 'state.jsonl');
    if (!d.ok) throw new Error(JSON.stringify(d.error));
    return d.value;
  };

  test("a record's JSON is parsed only when it is read; its head is read without", () => {
    const failed = rec('f', 1, { status: 'failed', error: 'exit 1' });
    const { records, warnings } = decoded(journalOf(rec('a', 1), rec('b', 1), failed, rec('a', 2), rec('c', 1), tomb('c')));
    expect(warnings).toEqual([]);
    expect([...records.keys()]).toEqual(['a', 'b', 'f']);
    const a2 = rec('a', 2);
    expect(fixedFields(records, 'a', a2)).toEqual(['ok', a2.outputHash, true, true]);
    expect(records.holds(taskId('a'), 'fingerprint', rec('a', 1).fingerprint)).toBe(false);
    expect(records.status(taskId('f'))).toBe('failed');
    expect(records.decoded).toBe(0);
    expect(records.get(taskId('a'))).toEqual(rec('a', 2));
    expect(records.get(taskId('f'))).toEqual(failed);
    expect(records.decoded).toBe(2);
    // Read whole, a record's fixed fields are still its line's.
    expect(fixedFields(records, 'a', a2)).toEqual(['ok', a2.outputHash, true, true]);
    expect(records.get(taskId('a'))).toEqual(rec('a', 2));
    expect(records.decoded).toBe(2);
  });

  test('set and delete replace a line that was never read; a deleted task set again goes to the end', () => {
    const { records } = decoded(journalOf(rec('a', 1), rec('b', 1)));
    records.set(rec('a', 5));
    expect(records.get(taskId('a'))).toEqual(rec('a', 5));
    expect(records.delete(taskId('b'))).toBe(true);
    records.set(rec('b', 6));
    records.set(rec('z', 1));
    expect([...records.keys()]).toEqual(['a', 'b', 'z']);
    expect(records.decoded).toBe(0);
  });

  test('a line whose JSON is invalid despite its checksum (a writer bug) counts as never run, and is said', () => {
    const good = encodeLine(rec('a', 1)).toString('utf8');
    const payload = good.slice(9, -1).replace('"durationMs":1', '"durationMs":-1');
    const { records, warnings } = decoded(Buffer.concat([frame(JSON.stringify({ format: 'nodegraph-state', version: 2 })), frame(payload)]));
    expect(warnings).toEqual([]);
    expect(records.status(taskId('a'))).toBe('ok');
    expect(records.get(taskId('a'))).toBeUndefined();
    expect(records.has(taskId('a'))).toBe(false);
    expect(records.lateWarnings).toMatchObject([{ kind: 'distrusted', id: 'a' }]);
  });

  test('a record this run appended is kept as where it went, with its head; read back whole when asked', () => {
    const j = open();
    const a = rec('a', 1);
    const where = j.append(a);
    if (!where.ok || where.value === undefined) throw new Error('append');
    const table = new RecordTable();
    table.setWritten(a, where.value, j.readBack);
    expect(fixedFields(table, 'a', a)).toEqual(['ok', a.outputHash, true, true]);
    expect(table.decoded).toBe(0);
    expect(table.get(taskId('a'))).toEqual(a);
    // One that does not read back as itself is not trusted.
    const b = rec('b', 1);
    table.setWritten(b, where.value, j.readBack);
    expect(table.get(taskId('b'))).toBeUndefined();
    expect(table.lateWarnings).toMatchObject([{ kind: 'distrusted', id: 'b' }]);
  });
});

describe('checkRecord', () => {
  test('accepts records and tombstones, rejects wrong shapes with a path', () => {
    expect(checkRecord(rec('a')).ok).toBe(true);
    expect(checkRecord(tomb('a')).ok).toBe(true);
    expect(checkRecord({ ...rec('a'), recipe: { ...rec('a').recipe, timeout: '5m' } }).ok).toBe(true);
    const cases: [unknown, RegExp][] = [
      [null, /not an object/],
      [{ ...rec('a'), v: 2 }, /^v:/],
      [{ ...rec('a'), id: '' }, /^id:/],
      [{ ...rec('a'), inputs: { x: 'md5:1' } }, /^inputs\.x:/],
      [{ ...rec('a'), edges: { needs: [1], after: [] } }, /^edges\.needs:/],
      [{ ...rec('a'), recipe: { ...rec('a').recipe, stop: ['ls'] } }, /^recipe\.stop:/],
      [{ ...rec('a'), recipe: { ...rec('a').recipe, timeout: '0s' } }, /^recipe\.timeout:/],
      [{ ...rec('a'), recipe: { ...rec('a').recipe, timeout: 30 } }, /^recipe\.timeout:/],
      [{ ...rec('a'), durationMs: -1 }, /^durationMs:/],
      [{ ...rec('a'), error: 3 }, /^error:/],
      [{ v: 1, id: 'a', deleted: false }, /^deleted:/],
      [{ v: 1, id: 'a', deleted: true, more: 1 }, /unexpected keys/],
    ];
    for (const [value, message] of cases) {
      const c = checkRecord(value);
      expect(c.ok, JSON.stringify(value)).toBe(false);
      if (!c.ok) expect(c.message).toMatch(message);
    }
  });

  test('loads check the hash form only; appends check the hex digits too', () => {
    const odd = { ...rec('a'), outputHash: `sha256:${'z'.repeat(64)}` };
    expect(checkRecord(odd, true).ok).toBe(false);
    expect(checkRecord(odd, false).ok).toBe(true);
  });
});

describe('memoryStore', () => {
  test('replays like the journal and validates appends', () => {
    const m = memoryStore([rec('a', 1)]);
    m.append(rec('b', 1));
    m.append(rec('a', 2));
    m.append(tomb('b'));
    const r = m.load();
    expect(r.ok && [...r.value.records.entries()]).toEqual([['a', rec('a', 2)]]);
    expect(m.appended).toHaveLength(3);
    expect(() => m.append({ ...rec('c'), status: 'nope' } as unknown as TaskRecord)).toThrow();
    m.sync();
    expect(m.syncs).toBe(1);
    m.close();
    expect(() => m.load()).toThrow(/after close/);
  });

  test('loaded records are copies', () => {
    const m = memoryStore([rec('a', 1)]);
    const first = m.load();
    if (first.ok) first.value.records.get(taskId('a'))!.durationMs = 99;
    const again = m.load();
    expect(again.ok && again.value.records.get(taskId('a'))?.durationMs).toBe(1);
  });
});

describe('openState', () => {
  test('a state folder the lock made goes with it when nothing was kept in it; one that was there, or holds a record, stays', () => {
    const made = join(dir, 'made');
    const empty = openState(made, { lock: true });
    if (!empty.ok) throw new Error(JSON.stringify(empty.error));
    empty.value.close();
    expect(existsSync(made)).toBe(false);
    const kept = openState(made, { lock: true });
    if (!kept.ok) throw new Error(JSON.stringify(kept.error));
    kept.value.store.append(rec('a', 1));
    kept.value.close();
    expect(readdirSync(made)).toEqual([JOURNAL_FILE]);
    const there = join(dir, 'there');
    mkdirSync(there);
    const again = openState(there, { lock: true });
    if (!again.ok) throw new Error(JSON.stringify(again.error));
    again.value.close();
    expect(existsSync(there)).toBe(true);
  });

  test('with the lock: loads, appends, and close() syncs and releases', () => {
    const s = openState(dir, { lock: true, command: 'nodegraph apply' });
    if (!s.ok) throw new Error(JSON.stringify(s.error));
    expect(existsSync(join(dir, 'lock'))).toBe(true);
    expect(openState(dir, { lock: true })).toMatchObject({ ok: false, error: { reason: 'locked', holder: { pid: process.pid, command: 'nodegraph apply' } } });
    s.value.store.append(rec('a', 1));
    s.value.close();
    s.value.close();
    expect(existsSync(join(dir, 'lock'))).toBe(false);
    const ro = openState(dir, { lock: false });
    if (!ro.ok) throw new Error('read-only');
    expect([...ro.value.records.keys()]).toEqual(['a']);
    expect(() => ro.value.store.append(rec('b'))).toThrow(/read-only/);
    ro.value.close();
  });

  test('warnings come back as messages', () => {
    open().append(rec('a', 1));
    lock?.release();
    lock = undefined;
    for (const j of opened.splice(0)) j.close();
    truncateSync(file(), readFileSync(file()).length - 30);
    const s = openState(dir, { lock: false });
    expect(s.ok && s.value.warnings[0]).toMatch(/^state: line 2: the last line was cut off/);
  });
});
