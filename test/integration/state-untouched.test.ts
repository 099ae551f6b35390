// What a command writes to the state folder, through the real CLI: nothing when
// it fails with an error; the hash cache alone for a plan; and a damaged journal
// line is warned about by one run only, which compacts it away.

import { existsSync, readdirSync, readFileSync, statSync, truncateSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const graph = `
  ng.task('copy', { inputs: { src: ng.file('in/a.txt') }, outputs: ['out/a'], run: ['cp', 'in/a.txt', 'out/a'] });
  ng.task('second', { inputs: { src: ng.file('in/b.txt') }, outputs: ['out/b'], run: ['cp', 'in/b.txt', 'out/b'] });
`;

/** Every file of the state folder with its size, mtime and inode: any write shows. */
function snapshot(dir = rig.path('.nodegraph'), prefix = '', out: Record<string, string> = {}): Record<string, string> {
  for (const name of readdirSync(dir).sort()) {
    const st = statSync(path.join(dir, name));
    if (st.isDirectory()) snapshot(path.join(dir, name), `${prefix}${name}/`, out);
    else out[`${prefix}${name}`] = `${st.size} ${st.mtimeMs} ${st.ino} ${readFileSync(path.join(dir, name)).toString('base64')}`;
  }
  return out;
}

async function applied(): Promise<void> {
  rig.write('in/a.txt', 'a\n');
  rig.write('in/b.txt', 'b\n');
  rig.nodefile(graph);
  expect((await rig.run(['apply'])).code).toBe(0);
}

test('an apply or plan that fails with an error writes nothing to the state folder, the hash cache included', async () => {
  await applied();
  const before = snapshot();
  // The input's content changed (the cache would learn it), and then a declaration names a missing input.
  rig.write('in/a.txt', 'changed\n');
  rig.nodefile(`${graph}\n  ng.task('third', { inputs: { src: ng.file('in/missing.txt') }, run: ['true'] });`);
  for (const command of [['apply'], ['plan']]) {
    const failed = await rig.run(command);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('error[missing-input]');
    expect(snapshot()).toEqual(before);
  }
  // A saved plan refused as stale.
  rig.nodefile(graph);
  expect((await rig.run(['plan', '--out', 'plan.json'])).code).toBe(0);
  rig.write('in/b.txt', 'moved on\n');
  const settled = snapshot();
  const refused = await rig.run(['apply', 'plan.json']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('error[plan-stale]');
  expect(snapshot()).toEqual(settled);
});

test('a plan that succeeds may update the hash cache and nothing else', async () => {
  await applied();
  const before = snapshot();
  rig.write('in/a.txt', 'changed\n');
  const plan = await rig.run(['plan']);
  expect(plan.code).toBe(0);
  expect(plan.stdout).toContain('copy');
  const after = snapshot();
  for (const name of Object.keys(before)) if (name !== 'hashcache' && !name.startsWith('hashcache.')) expect(after[name]).toBe(before[name]);
  expect(Object.keys(after).filter((n) => !(n in before) && !n.startsWith('hashcache'))).toEqual([]);
});

test('a torn journal line warns on the run that finds it, and not on the next', async () => {
  await applied();
  rig.write('in/a.txt', 'changed\n');
  expect((await rig.run(['apply'])).code).toBe(0);
  // What a crash mid-append leaves: the last record cut short.
  const journal = rig.path('.nodegraph/state.jsonl');
  truncateSync(journal, statSync(journal).size - 40);
  const first = await rig.run(['apply']);
  expect(first.code).toBe(0);
  // Opening the journal for appends ends the torn line, which then reads as a corrupt one.
  expect(first.stdout + first.stderr).toMatch(/warning: state: line \d+: checksum mismatch \(corrupted, or cut off by an earlier crash\) \(apparently for copy\); dropped/);
  // The record it lost is not trusted: the task runs again.
  expect(first.stdout).toMatch(/copy/);
  const second = await rig.run(['apply']);
  expect(second.code).toBe(0);
  expect(second.stdout + second.stderr).not.toMatch(/warning/);
  expect(second.stdout).toContain('up to date');
  expect(readFileSync(journal, 'utf8').trimEnd().split('\n')).toHaveLength(3);
});

test('a teardown of a project never applied says there is nothing to do and leaves no state folder', async () => {
  rig.nodefile(graph);
  for (const command of [['destroy', '--yes'], ['stop'], ['destroy', '--yes', '--from-state']]) {
    const result = await rig.run(command);
    expect(result.code, command.join(' ')).toBe(0);
    expect(result.stdout, command.join(' ')).toMatch(/^Nothing to (destroy|stop): the state records no task\.$/m);
    expect(existsSync(rig.path('.nodegraph')), command.join(' ')).toBe(false);
  }
});
