// The journal fsyncs only what it wrote: a run that appended nothing (a no-op)
// closes without an fsync, and one that appended syncs once. fsyncSync is
// wrapped to count its calls; every call still reaches the real one.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test, vi } from 'vitest';
import { acquire, JOURNAL_FILE, openJournal, type JournalStore, type Lock } from '../../src/state/index.ts';
import { taskId } from '../../src/ids.ts';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  return { ...real, fsyncSync: vi.fn(real.fsyncSync) };
});
const fsyncs = vi.mocked(fs.fsyncSync);

let dir: string;
let lock: Lock;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodegraph-sync-'));
  const l = acquire(dir, { command: 'test' });
  if (!l.ok) throw new Error(JSON.stringify(l.error));
  lock = l.value;
});
afterEach(() => {
  lock.release();
  rmSync(dir, { recursive: true, force: true });
});

function open(): JournalStore {
  const j = openJournal(lock);
  if (!j.ok) throw new Error(JSON.stringify(j.error));
  return j.value;
}

const tomb = (id: string) => ({ v: 1 as const, id: taskId(id), deleted: true as const });

test('sync after appending fsyncs once; sync with nothing new, and a reopened journal never written to, do not', () => {
  const first = open(); // creates the journal: its header is fsynced here
  fsyncs.mockClear();
  first.append(tomb('a'));
  expect(first.sync().ok).toBe(true);
  expect(fsyncs).toHaveBeenCalledTimes(1);
  expect(first.sync().ok).toBe(true);
  expect(fsyncs).toHaveBeenCalledTimes(1);
  first.close();

  fsyncs.mockClear();
  const again = open();
  expect(again.load().ok).toBe(true);
  expect(again.sync().ok).toBe(true);
  again.close();
  expect(fsyncs).not.toHaveBeenCalled();
});

test('a torn tail terminated on open is fsynced at the next sync, though nothing was appended', () => {
  open().close();
  const file = join(dir, JOURNAL_FILE);
  writeFileSync(file, `${readFileSync(file, 'latin1')}{"torn`, 'latin1');
  fsyncs.mockClear();
  const j = open();
  expect(fsyncs).not.toHaveBeenCalled();
  expect(j.sync().ok).toBe(true);
  expect(fsyncs).toHaveBeenCalledTimes(1);
  j.close();
  expect(readFileSync(file, 'latin1').endsWith('{"torn\n')).toBe(true);
});
