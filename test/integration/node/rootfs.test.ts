// The rootfs task (src/node/rootfs.ts) against the fake runner, tar run for real: a fresh unpack of
// the same image is a new tree, so its output changes and what the slot wrote into the old tree is
// written again; a staging tree left by a cut-short unpack goes without a new unpack.

import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { rootfsTask } from '../../../src/node/rootfs.ts';
import { FakeRunner } from '../../support/fake-runner.ts';
import { makeImage } from '../../support/node/graph-rig.ts';
import { checkOf, declared, runOf, sandbox } from '../../support/node/task-kit.ts';

let dir: string;
let runner: FakeRunner;
beforeEach(() => {
  ({ dir } = sandbox('rootfs'));
  runner = new FakeRunner({ sandbox: dir, passthrough: (argv) => argv[0] === 'tar' });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('unpacks the image; unpacked again, the output names the new tree; a leftover staging tree just goes', async () => {
  const d = declared();
  const image = makeImage(dir);
  const slotDir = path.join(dir, 'layout/kube1');
  const imageInput = d.ng.file(image);
  rootfsTask(d.ng, { id: 'kube1/rootfs', image, imageInput, slotDir, keepOld: false, after: [], stopContainer: ['true'], removeSlot: ['true'] });
  const task = d.spec('kube1/rootfs');
  expect(await checkOf('kube1/rootfs', task, runner)).toBe(`${slotDir}/rootfs has no /sbin/init`);
  const first = (await runOf('kube1/rootfs', task, runner)).value as { digest: string; tree: number };
  expect(first.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(await checkOf('kube1/rootfs', task, runner)).toBe(true);
  // What a slot's task wrote into the tree (an enabled unit) is not in a fresh unpack of the same image.
  const wants = path.join(slotDir, 'rootfs/etc/systemd/system/multi-user.target.wants/containerd.service');
  mkdirSync(path.dirname(wants), { recursive: true });
  writeFileSync(wants, '');
  const again = (await runOf('kube1/rootfs', task, runner, { firstRun: false })).value as { digest: string; tree: number };
  expect(again.digest).toBe(first.digest);
  expect(again.tree).not.toBe(first.tree);
  expect(existsSync(wants)).toBe(false);

  mkdirSync(path.join(slotDir, 'rootfs.new/sbin'), { recursive: true });
  expect(await checkOf('kube1/rootfs', task, runner)).toBe(`${slotDir}/rootfs.new is left from an unpack cut short`);
  runner.reset();
  const cleaned = await runOf('kube1/rootfs', task, runner, { firstRun: false });
  expect(cleaned.value).toEqual(again);
  expect(cleaned.logs).toEqual([`removed ${slotDir}/rootfs.new, left by an unpack cut short; ${slotDir}/rootfs is ${again.digest} already`]);
  expect(runner.calls).toEqual([]);
});
