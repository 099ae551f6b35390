// What the graph reads as it loads (src/node/takeover.ts switchingFrom): which slots a switch is
// under way from, from runc's state folder and the switch marker, running no process.

import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { writeSwitch } from '../../../src/node/switch.ts';
import { switchingFrom } from '../../../src/node/takeover.ts';
import type { FakeRunner } from '../../support/fake-runner.ts';
import { sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
let runcRoot: string;
beforeEach(() => ({ dir, runner, runcRoot } = sandbox('switching')));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const SLOTS = [
  { slot: 'kube1', containerId: 'kube1' },
  { slot: 'kube2', containerId: 'kube2' },
];

it("names the other slot while its container is in runc's state folder, or while the marker says a switch to this slot is under way", async () => {
  const runc = { binary: '/usr/sbin/runc', stateRoot: runcRoot };
  const marker = path.join(dir, 'switch.json');
  expect(switchingFrom(runc, marker, 'kube2', SLOTS)).toEqual([]);
  await runner.run(['/usr/sbin/runc', '--root', runcRoot, 'run', '--bundle', path.join(dir, 'kube1'), 'kube1'], { cwd: dir });
  // The slot's own container is no switch.
  expect(switchingFrom(runc, marker, 'kube1', SLOTS)).toEqual([]);
  expect(switchingFrom(runc, marker, 'kube2', SLOTS)).toEqual(['kube1']);
  await runner.run(['/usr/sbin/runc', '--root', runcRoot, 'delete', '--force', 'kube1'], { cwd: dir });
  runner.reset();
  expect(switchingFrom(runc, marker, 'kube2', SLOTS)).toEqual([]);
  // A run cut short after the old slot went: the marker still says so; one to another slot does not count.
  writeSwitch(marker, { from: ['kube1'], to: 'kube2', reset: false });
  expect(switchingFrom(runc, marker, 'kube2', SLOTS)).toEqual(['kube1']);
  expect(switchingFrom(runc, marker, 'kube1', SLOTS)).toEqual([]);
  expect(runner.calls).toEqual([]);
});
