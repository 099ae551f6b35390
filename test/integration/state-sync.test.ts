// The journal fsyncs only what it wrote: a run that appended nothing (a no-op)
// closes without an fsync, and one that appended syncs once. Seen from
// outside: the journal runs in its own Node under strace, which records each
// fsync and fdatasync between marks the script leaves (an access to a path
// under /nodegraph-mark/, which fails and changes nothing).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { repo } from '../support/rig.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-sync-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Runs `body` (with `dir`, `open()`, `tomb(id)` and `mark(name)` in scope) holding the state lock; returns
 * the syncs made between each mark and the one before it, by the name of the later.
 */
function syncsBetweenMarks(body: string): Record<string, number> {
  const script = `
import { accessSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { acquire, JOURNAL_FILE, openJournal } from ${JSON.stringify(path.join(repo, 'src/state/index.ts'))};
import { taskId } from ${JSON.stringify(path.join(repo, 'src/ids.ts'))};
const dir = ${JSON.stringify(dir)};
const mark = (name) => { try { accessSync('/nodegraph-mark/' + name); } catch {} };
const held = acquire(dir, { command: 'test' });
if (!held.ok) throw new Error(JSON.stringify(held.error));
const open = () => { const j = openJournal(held.value); if (!j.ok) throw new Error(JSON.stringify(j.error)); return j.value; };
const tomb = (id) => ({ v: 1, id: taskId(id), deleted: true });
mark('start');
${body}
held.value.release();
`;
  const log = path.join(dir, 'strace.log');
  execFileSync('strace', ['-f', '-qq', '-e', 'trace=fsync,fdatasync,access,faccessat,faccessat2', '-o', log, process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
  const counts: Record<string, number> = {};
  let syncs = 0;
  for (const line of readFileSync(log, 'utf8').split('\n')) {
    const marked = /"\/nodegraph-mark\/([^"]+)"/.exec(line);
    if (marked !== null) {
      counts[marked[1]!] = syncs;
      syncs = 0;
    } else if (/\b(fsync|fdatasync)\(/.test(line)) syncs++;
  }
  return counts;
}

test('sync after appending fsyncs once; sync with nothing new, and a reopened journal never written to, do not', () => {
  const syncs = syncsBetweenMarks(`
    const first = open(); // a journal is made by its first record
    mark('opened');
    first.append(tomb('a')); // makes the journal: its header is fsynced here
    mark('created');
    first.sync();
    mark('appended');
    first.sync();
    mark('synced-again');
    first.close();
    mark('closed');
    const again = open();
    again.load();
    again.sync();
    again.close();
    mark('reopened');
  `);
  expect(syncs).toMatchObject({ opened: 0, appended: 1, 'synced-again': 0, reopened: 0 });
  // The marks were seen, and so would be the fsyncs between them.
  expect(syncs['created']).toBeGreaterThan(0);
});

test('a torn tail terminated on open is fsynced at the next sync, though nothing was appended', () => {
  const syncs = syncsBetweenMarks(`
    const made = open();
    made.append(tomb('a'));
    made.close();
    const file = join(dir, JOURNAL_FILE);
    writeFileSync(file, readFileSync(file, 'latin1') + '{"torn', 'latin1');
    mark('torn');
    const j = open();
    mark('opened');
    j.sync();
    mark('synced');
    j.close();
  `);
  expect(syncs).toMatchObject({ opened: 0, synced: 1 });
  expect(readFileSync(path.join(dir, 'state.jsonl'), 'latin1').endsWith('{"torn\n')).toBe(true);
});
