// The state journal, record validation and the in-memory store, on real temp dirs.

import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { contentHash, taskId, type ContentHash } from '../../src/ids.ts';
import {
  acquire,
  checkRecord,
  decodeJournal,
  encodeLine,
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
} from '../../src/state/index.ts';
import { RecordMap } from '../../src/state/records.ts';

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
    expect(readOnly().records).toEqual(loaded.records);

    const lines = readFileSync(file(), 'utf8').split('\n');
    expect(lines[0]).toMatch(/^[0-9a-f]{8} \{"format":"nodegraph-state","version":1\}$/);
    expect(lines[1]).toMatch(/^[0-9a-f]{8} \{"v":1,"id":"a",/);
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
    // The torn bytes stay as a line of their own (now newline-terminated) until compaction.
    expect(after.warnings.map((w) => w.kind)).toEqual(['corrupt-line']);
    expect(after.warnings[0]?.message).toMatch(/line 4: checksum mismatch \(corrupted, or cut off by an earlier crash\)/);
    const lines = readFileSync(file(), 'utf8').split('\n');
    expect(lines[4]).toMatch(/^[0-9a-f]{8} \{"v":1,"id":"c",/);
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
    const bad = encodeLine({ ...rec('b', 1), status: 'maybe' });
    writeFileSync(file(), Buffer.concat([readFileSync(file()), bad]));
    const s = readOnly();
    expect([...s.records.keys()]).toEqual(['a']);
    expect(s.warnings[0]).toMatchObject({ kind: 'invalid-record', line: 3, id: 'b' });
    expect(s.warnings[0]?.message).toMatch(/status/);
  });

  test('a journal written by a newer format version is refused, not dropped or touched', () => {
    const newer = Buffer.concat([encodeLine({ format: 'nodegraph-state', version: 2 }), encodeLine({ v: 2, id: 'a' })]);
    writeFileSync(file(), newer);
    const r = readState(dir);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toMatchObject({ reason: 'state-unreadable', kind: 'newer-format', found: 2, supported: 1 });
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
    writeFileSync(file(), Buffer.concat([readFileSync(file()), encodeLine({ v: 3, id: 'b', whatever: true })]));
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
    const header = encodeLine({ format: 'nodegraph-state', version: 1 });
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
    expect(after.records).toEqual(before.records);
    expect(after.stats.lines).toBe(2);
    expect(readFileSync(file(), 'utf8').trimEnd().split('\n')).toHaveLength(3);
    // Appends after compaction go to the new file.
    j.append(rec('d', 1));
    expect([...readOnly().records.keys()]).toEqual(['a', 'c', 'd']);
    expect(readdirSync(dir).filter((n) => n.includes('compact'))).toEqual([]);
  });

  test('load compacts past the threshold (default: more than 2 × live + 1000 lines)', () => {
    const j = open();
    for (let n = 0; n < 1003; n++) j.append(rec('a', n));
    const s = load(j);
    expect(s.stats.compacted).toBe(true);
    expect(s.stats.lines).toBe(1003);
    expect(s.records.get(taskId('a'))?.durationMs).toBe(1002);
    expect(load(j).stats).toMatchObject({ lines: 1, compacted: false });
  });

  test('distrusted records stay distrusted through compaction', () => {
    const j = open({ compactWhen: () => false });
    j.append(rec('a', 1));
    j.append(rec('a', 2));
    truncateSync(file(), readFileSync(file()).length - 100);
    j.close();
    lock?.release();
    lock = undefined;
    const j2 = open({ compactWhen: () => true });
    const s = load(j2);
    expect(s.stats.compacted).toBe(true);
    expect(s.records.get(taskId('a'))?.status).toBe('failed');
    const after = readOnly();
    expect(after.warnings).toEqual([]);
    expect(after.records.get(taskId('a'))).toMatchObject({ status: 'failed', durationMs: 1 });
  });

  test('a temp file left by a crash mid-compaction does not affect loading and is swept by the next writer', () => {
    const j = open({ compactWhen: () => false });
    j.append(rec('a', 1));
    j.append(rec('b', 1));
    j.close();
    lock?.release();
    lock = undefined;
    const leftover = join(dir, `${JOURNAL_FILE}.compact-12345-deadbeef.tmp`);
    writeFileSync(leftover, encodeLine({ format: 'nodegraph-state', version: 1 }).toString() + 'garbage half wri');
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

describe('records kept as text until read (RecordMap)', () => {
  const journalOf = (...lines: unknown[]): Buffer =>
    Buffer.concat([encodeLine({ format: 'nodegraph-state', version: 1 }), ...lines.map((l) => encodeLine(l))]);
  const decoded = (buf: Buffer) => {
    const d = decodeJournal(buf, 'state.jsonl');
    if (!d.ok) throw new Error(JSON.stringify(d.error));
    if (!(d.value.records instanceof RecordMap)) throw new Error('not a RecordMap');
    return { ...d.value, records: d.value.records };
  };

  test('a plain ok record is decoded only when read, and reads as an eager decode does', () => {
    const failed = rec('f', 1, { status: 'failed', error: 'exit 1' });
    const buf = journalOf(rec('a', 1), rec('b', 1), failed, rec('a', 2), rec('c', 1), tomb('c'));
    const { records, warnings } = decoded(buf);
    expect(warnings).toEqual([]);
    // a (its newer line), b: text; f: failed, decoded at once; c: deleted.
    expect(records.undecoded).toBe(2);
    expect(records.size).toBe(3);
    expect(records.has(taskId('a')) && records.has(taskId('f')) && !records.has(taskId('c'))).toBe(true);
    expect(records.isOk(taskId('a')) && !records.isOk(taskId('f')) && !records.isOk(taskId('c'))).toBe(true);
    expect(records.textOf(taskId('b'))).toBe(JSON.stringify(rec('b', 1)));
    expect(records.get(taskId('a'))).toEqual(rec('a', 2));
    expect(records.undecoded).toBe(1);
    expect(records.textOf(taskId('a'))).toBeUndefined();
    // Order is the journal's (first appearance), whatever was read first.
    expect([...records.keys()]).toEqual(['a', 'b', 'f']);
    expect(records.undecoded).toBe(0);
    const eager = decodeJournal(buf, 'state.jsonl', { keepEntries: true });
    expect(eager.ok && [...eager.value.records]).toEqual([...records]);
  });

  test('set and delete replace a text that was never read', () => {
    const { records } = decoded(journalOf(rec('a', 1), rec('b', 1)));
    records.set(taskId('a'), rec('a', 5));
    expect(records.delete(taskId('b'))).toBe(true);
    expect(records.undecoded).toBe(0);
    expect([...records.values()]).toEqual([rec('a', 5)]);
  });

  // Only a writer's bug can put such a line there: its checksum is good.
  const broken = { ...rec('a', 2), recipe: { cwd: 7 } };

  test('a text that is not a valid record, found when read, is dropped as a load would have: the previous record kept as failed', () => {
    const { records, warnings } = decoded(journalOf(rec('a', 1), broken, rec('b', 1)));
    expect(warnings).toEqual([]);
    expect(records.isOk(taskId('a'))).toBe(true);
    const a = records.get(taskId('a'));
    expect(a).toEqual({ ...rec('a', 1), status: 'failed', error: 'state record lost (journal line 3 was unreadable); the task must run again' });
    expect(records.lateWarnings.map((w) => w.kind)).toEqual(['invalid-record', 'distrusted']);
    // An eager decode of the same bytes agrees.
    const eager = decodeJournal(journalOf(rec('a', 1), broken, rec('b', 1)), 'state.jsonl', { keepEntries: true });
    expect(eager.ok && eager.value.records.get(taskId('a'))).toEqual(a);
  });

  test('a bad text between good ones is passed over, as a load passes over it', () => {
    const between = decoded(journalOf(rec('a', 1), broken, rec('a', 3)));
    expect(between.records.get(taskId('a'))).toEqual(rec('a', 3));
    expect(between.records.lateWarnings.map((w) => [w.kind, w.line])).toEqual([['invalid-record', 3]]);
    // Two bad ones in a row fall back past both.
    const twice = decoded(journalOf(rec('a', 1), broken, { ...broken, durationMs: 9 }));
    expect(twice.records.get(taskId('a'))).toMatchObject({ ...rec('a', 1), status: 'failed' });
    const eager = decodeJournal(journalOf(rec('a', 1), broken, { ...broken, durationMs: 9 }), 'state.jsonl', { keepEntries: true });
    // (The eager load names the first bad line in the error; this, the newest.)
    const { error: _e, ...lazyRecord } = twice.records.get(taskId('a'))!;
    if (!eager.ok) throw new Error('eager decode failed');
    const { error: _f, ...eagerRecord } = eager.value.records.get(taskId('a'))!;
    expect(lazyRecord).toEqual(eagerRecord);
  });

  test('...and with no previous record the task counts as never run', () => {
    const { records } = decoded(journalOf(broken, rec('b', 1)));
    expect(records.size).toBe(2);
    expect(records.get(taskId('a'))).toBeUndefined();
    expect(records.has(taskId('a'))).toBe(false);
    expect([...records.keys()]).toEqual(['b']);
    expect(records.lateWarnings.map((w) => w.kind)).toEqual(['invalid-record', 'distrusted']);
  });

  test('a record whose id JSON escapes, or that is not ok, is decoded at once', () => {
    const { records } = decoded(journalOf(rec('a"b', 1), rec('c\\d', 1), rec('é', 1), rec('g', 1, { status: 'failed' })));
    expect(records.undecoded).toBe(1);
    expect(records.textOf(taskId('é'))).toBeDefined();
    expect([...records.keys()]).toEqual(['a"b', 'c\\d', 'é', 'g']);
  });
});

describe('records kept as where they were written (RecordMap.setWritten)', () => {
  test('append says where a record went; readBack gives its text, checked, after a torn line and a compaction too', () => {
    const j = open({ compactWhen: () => false });
    const a = rec('a', 1, { error: 'ünïcödé ☃' });
    const first = j.append(a);
    if (!first.ok || first.value === undefined) throw new Error('no place');
    expect(j.readBack(first.value)).toBe(JSON.stringify(a));
    // The bytes are where it says: the line's JSON, between its checksum and newline.
    const bytes = readFileSync(file());
    expect(bytes.subarray(first.value.at, first.value.at + first.value.bytes).toString()).toBe(JSON.stringify(a));
    expect(bytes[first.value.at + first.value.bytes]).toBe(0x0a);
    // Anything else there is not a record it wrote.
    expect(j.readBack({ at: first.value.at + 1, bytes: first.value.bytes - 1 })).toBeUndefined();
    expect(j.readBack({ at: first.value.at, bytes: first.value.bytes + 5 })).toBeUndefined();
    // A journal opened after a torn line: the newline it adds comes before the place.
    j.close();
    writeFileSync(file(), Buffer.concat([readFileSync(file()), Buffer.from('0badc0de {"v":1,"id":"to')]));
    const k = open({ compactWhen: () => false });
    const b = k.append(rec('b', 1));
    if (!b.ok || b.value === undefined) throw new Error('no place');
    expect(k.readBack(b.value)).toBe(JSON.stringify(rec('b', 1)));
    // A compaction moves every line: an old place no longer reads as a record.
    const c = k.append(rec('c', 1));
    if (!c.ok || c.value === undefined) throw new Error('no place');
    expect(k.compact().ok).toBe(true);
    expect(k.readBack(c.value)).toBeUndefined();
    const d = k.append(rec('d', 1));
    expect(d.ok && d.value !== undefined && k.readBack(d.value)).toBe(JSON.stringify(rec('d', 1)));
    // The memory store keeps places too.
    const m = memoryStore();
    const e = m.append(rec('e', 1));
    expect(e.ok && e.value !== undefined && m.readBack(e.value)).toBe(JSON.stringify(rec('e', 1)));
  });

  test('a written record answers isOk and okOutputHash without a read, and reads back as it was on get', () => {
    const j = open();
    const records = new RecordMap();
    const reads: number[] = [];
    const readBack = (where: Appended): string | undefined => {
      reads.push(where.at);
      return j.readBack(where);
    };
    const a = rec('a', 1);
    const failed = rec('f', 1, { status: 'failed', error: 'exit 1' });
    for (const r of [a, failed]) {
      const where = j.append(r);
      if (!where.ok || where.value === undefined) throw new Error('no place');
      records.setWritten(r, where.value, readBack);
    }
    expect(records.written).toBe(2);
    expect(records.isOk(taskId('a')) && !records.isOk(taskId('f'))).toBe(true);
    expect(records.okOutputHash(taskId('a'))).toBe(a.outputHash);
    expect(records.okOutputHash(taskId('f'))).toBeUndefined();
    expect(records.textOf(taskId('a'))).toBeUndefined();
    expect(reads).toEqual([]);
    expect(records.get(taskId('a'))).toEqual(a);
    expect(records.readBacks).toBe(1);
    expect(records.get(taskId('a'))).toEqual(a); // kept once read
    expect(records.readBacks).toBe(1);
    expect([...records.values()]).toEqual([a, failed]);
    expect(records.written).toBe(0);
    expect(records.lateWarnings).toEqual([]);
  });

  test('many written records each keep their own place, status and output hash; one of another form is kept as given', () => {
    const records = new RecordMap();
    const m = memoryStore();
    // Room for 100 made at once, then grown twice by doubling: what it copies as it grows is checked too.
    records.reserveWritten(100);
    const written = Array.from({ length: 300 }, (_, i) => rec(`t${i}`, i, i % 7 === 3 ? { status: 'failed', error: `exit ${i}` } : {}));
    for (const r of written) {
      const where = m.append(r);
      if (!where.ok || where.value === undefined) throw new Error('no place');
      records.setWritten(r, where.value, m.readBack);
    }
    // Not this run's form (uppercase digits): answered as given, not as 64 lowercase digits decoded.
    const odd = { ...rec('odd', 1), outputHash: `sha256:${'AB'.repeat(32)}` as ContentHash };
    records.setWritten(odd, { at: 0, bytes: 1 }, m.readBack);
    expect(records.written).toBe(301);
    for (const r of written) {
      expect(records.isOk(r.id)).toBe(r.status === 'ok');
      expect(records.okOutputHash(r.id)).toBe(r.status === 'ok' ? r.outputHash : undefined);
    }
    expect(records.okOutputHash(taskId('odd'))).toBe(odd.outputHash);
    for (const r of written.filter((_, i) => i % 50 === 49)) expect(records.get(r.id)).toEqual(r);
    expect(records.readBacks).toBe(6);
    expect(records.lateWarnings).toEqual([]);
  });

  test('a written record that does not read back as itself is not trusted: never run here, and said', () => {
    const records = new RecordMap();
    const m = memoryStore();
    const place = (r: TaskRecord): Appended => {
      const where = m.append(r);
      if (!where.ok || where.value === undefined) throw new Error('no place');
      return where.value;
    };
    const a = place(rec('a', 1));
    const b = place(rec('b', 1));
    // a's place holds b's record (a moved line); b's place reads as nothing (a lost one).
    records.setWritten(rec('a', 1), b, m.readBack);
    records.setWritten(rec('b', 1), { at: a.at, bytes: 3 }, m.readBack);
    expect(records.get(taskId('a'))).toBeUndefined();
    expect(records.has(taskId('a'))).toBe(false);
    expect([...records.keys()]).toEqual([]);
    expect(records.lateWarnings.map((w) => [w.kind, w.id])).toEqual([
      ['distrusted', 'a'],
      ['distrusted', 'b'],
    ]);
  });
});

describe('checkRecord', () => {
  test('accepts records and tombstones, rejects wrong shapes with a path', () => {
    expect(checkRecord(rec('a')).ok).toBe(true);
    expect(checkRecord(tomb('a')).ok).toBe(true);
    const cases: [unknown, RegExp][] = [
      [null, /not an object/],
      [{ ...rec('a'), v: 2 }, /^v:/],
      [{ ...rec('a'), id: '' }, /^id:/],
      [{ ...rec('a'), inputs: { x: 'md5:1' } }, /^inputs\.x:/],
      [{ ...rec('a'), edges: { needs: [1], after: [] } }, /^edges\.needs:/],
      [{ ...rec('a'), recipe: { ...rec('a').recipe, stop: ['ls'] } }, /^recipe\.stop:/],
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
