// What the other commands say while an atomic apply holds the lock (it is
// under way, and by whom), and of the transaction folder a killed run left
// without its record (status reports it; the next apply removes it).

import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { collect, Rig, until } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig('nodegraph-words-');
  rig.write('shared/kept', 'kept\n');
  // `wait` blocks until the test creates `release`: the apply holds the lock until then.
  rig.nodefile(`
  ng.preserve('shared');
  ng.task('wait', { inputs: { v: ng.file('version') }, outputs: ['out/wait'], run: { shell: 'touch started; while [ ! -e release ]; do sleep 0.01; done; mkdir -p out; cat version > out/wait' } });
  `);
  writeFileSync(rig.path('version'), 'a\n');
});
afterEach(() => {
  writeFileSync(rig.path('release'), '');
  rig.cleanup();
});

interface Holder {
  readonly pid: number;
  readonly host: string;
  readonly command: string;
  readonly startedAt: string;
}

const holderText = (h: Holder): string => `pid ${h.pid} on ${h.host} (${h.command}), since ${h.startedAt}`;

test('while an atomic apply runs: destroy and stop name the holder; status, plan and generations say it is under way', async () => {
  writeFileSync(rig.path('release'), '');
  expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
  rig.write('version', 'b\n');
  rmSync(rig.path('release'));
  const child = rig.spawn(['apply', '--atomic']);
  const done = collect(child);
  await until(() => rig.exists('started') && rig.exists('.nodegraph/transaction.json'));
  const lock = JSON.parse(rig.read('.nodegraph/lock')) as Holder;
  expect(lock.pid).toBe(child.pid);
  const holder = { pid: lock.pid, host: lock.host, command: lock.command, startedAt: lock.startedAt };
  const transaction = JSON.parse(rig.read('.nodegraph/transaction.json')) as { startedAt: string; phase: string };

  for (const command of [['destroy', '--yes'], ['stop', 'wait']]) {
    const refused = await rig.run(command);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`error[locked]: the state is locked by ${holderText(holder)}, which is still running: wait for it to end\n`);
  }

  const underWay = `! an atomic apply from generation 1 to 2 is under way (${transaction.phase}, begun ${transaction.startedAt}), by ${holderText(holder)}`;
  const status = await rig.run(['status']);
  expect(status.stdout.split('\n')).toContain(underWay);
  expect(status.stdout).not.toContain('interrupted');
  const json = JSON.parse((await rig.run(['status', '--json'])).stdout) as { generation: unknown };
  expect(json.generation).toEqual({
    current: 1,
    interrupted: null,
    underWay: { from: 1, to: 2, phase: transaction.phase, startedAt: transaction.startedAt, holder },
    orphanedTransaction: null,
  });
  const plan = await rig.run(['plan']);
  expect(plan.stdout.split('\n')[0]).toBe(`${underWay}; this plan is of the machine as it is now`);
  expect(plan.stdout).not.toContain('interrupted');
  const generations = await rig.run(['generations']);
  expect(generations.stdout.split('\n')).toContain(underWay);
  const listed = JSON.parse((await rig.run(['generations', '--json'])).stdout) as { transactionHolder: unknown };
  expect(listed.transactionHolder).toEqual(holder);

  writeFileSync(rig.path('release'), '');
  expect((await done).code).toBe(0);
  // Its run gone, nothing is under way any more.
  const after = JSON.parse((await rig.run(['status', '--json'])).stdout) as { generation: unknown };
  expect(after.generation).toEqual({ current: 2, interrupted: null, underWay: null, orphanedTransaction: null });
});

test('a kill between saving the preserved copies and recording the transaction: status reports the folder, the next apply removes it', async () => {
  writeFileSync(rig.path('release'), '');
  expect((await rig.run(['apply', '--atomic'])).code).toBe(0);
  rig.write('version', 'b\n');
  const killed = await rig.run(['apply', '--atomic'], { NODEGRAPH_FAILPOINT: 'preserved' });
  expect(killed.signal).toBe('SIGKILL');
  expect(rig.exists('.nodegraph/transaction/preserved')).toBe(true);
  expect(rig.exists('.nodegraph/transaction.json')).toBe(false);

  const status = await rig.run(['status']);
  expect(status.stdout.split('\n')).toContain(
    '! .nodegraph/transaction holds the saved copies of an atomic apply that a killed run left without its transaction record: the next apply removes it',
  );
  const json = JSON.parse((await rig.run(['status', '--json'])).stdout) as { generation: unknown };
  expect(json.generation).toEqual({ current: 1, interrupted: null, underWay: null, orphanedTransaction: rig.path('.nodegraph/transaction') });
  const plan = await rig.run(['plan']);
  expect(plan.stdout.split('\n')[0]).toBe(
    '! .nodegraph/transaction holds the saved copies of an atomic apply that a killed run left without its transaction record: the next apply removes it',
  );

  const next = await rig.run(['apply', '--atomic']);
  expect(next.stderr).toBe('');
  expect(next.code).toBe(0);
  expect(next.stdout.split('\n')).toContain(
    `warning: removed ${rig.path('.nodegraph/transaction')}, the saved copies of an atomic apply that a killed run left without its transaction record`,
  );
  expect(existsSync(rig.path('.nodegraph/transaction'))).toBe(false);
  expect(readFileSync(rig.path('shared/kept'), 'utf8')).toBe('kept\n');
  expect(JSON.parse((await rig.run(['status', '--json'])).stdout).generation).toEqual({ current: 2, interrupted: null, underWay: null, orphanedTransaction: null });
});
