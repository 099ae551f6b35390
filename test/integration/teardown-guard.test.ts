// What a teardown must never remove, and what it runs: the project and the
// state are no task's outputs; a file a task now declares is not removed with
// the orphan that made it; a task still declared is destroyed as it is
// declared now; a state copied with its project does not remove the
// original's files.

import { cpSync, existsSync, readdirSync, symlinkSync } from 'node:fs';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

test('an output that is the project folder, a folder above it, the Nodefile or the state is refused where it is declared', async () => {
  rig.write('keep.txt', 'mine\n');
  const cases: [string, string][] = [
    ['.', ". is the Nodefile's folder: destroying the task would remove the project"],
    ['..', '.. is a folder that holds the Nodefile: destroying the task would remove the project'],
    ['Nodefile.ts', 'Nodefile.ts is the Nodefile itself: destroying the task would remove it'],
    ['.nodegraph', `.nodegraph is nodegraph's state folder ${rig.path('.nodegraph')}: destroying the task would remove what nodegraph applied`],
    ['.nodegraph/x', `.nodegraph/x is inside nodegraph's state folder ${rig.path('.nodegraph')}: destroying the task would remove what nodegraph applied`],
  ];
  for (const [output, why] of cases) {
    rig.nodefile(`  ng.task('a', { outputs: [${JSON.stringify(output)}], run: ['true'] });`);
    const result = await rig.run(['apply']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^error\\[invalid-field\\]: task a: field outputs\\[0\\]: ${why.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n --> Nodefile\\.ts:3:6\\n`));
    expect(readdirSync(rig.dir).sort()).toEqual(['Nodefile.ts', 'keep.txt']);
  }
  // Elsewhere, the state folder is the one named: below the project is then just a folder.
  rig.nodefile(`  ng.task('a', { outputs: ['.nodegraph/x'], run: ['sh', '-c', 'mkdir -p .nodegraph && touch .nodegraph/x'] });`);
  expect((await rig.run(['apply', '--state-dir', rig.path('state')])).code).toBe(0);
});

test('a renamed task: its old self is destroyed as an orphan, but the file the new one declares stays', async () => {
  rig.nodefile(`  ng.task('db', { outputs: ['precious.db'], run: ['sh', '-c', 'test -f precious.db || echo empty > precious.db'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.write('precious.db', 'years of data\n');
  rig.nodefile(`  ng.task('database', { outputs: ['precious.db'], run: ['sh', '-c', 'test -f precious.db || echo empty > precious.db'] });`);
  const apply = await rig.run(['apply']);
  expect(apply.code).toBe(0);
  expect(apply.stdout).toMatch(/- db\s+destroy\s+orphan: no longer in the Nodefile\n/);
  expect(apply.stdout).toContain(`warning: db: kept ${rig.path('precious.db')}, which is now database's output`);
  expect(rig.read('precious.db')).toBe('years of data\n');
  expect((await rig.run(['status'])).stdout).not.toContain('db ');
});

test('a record that would remove the project (made by a Nodefile that lived elsewhere) keeps it and says so', async () => {
  // One state, two Nodefiles: the first one's output is the folder the second one lives in.
  rig.write('a/Nodefile.ts', `export default (ng: any) => { ng.task('made', { outputs: ['../b'], run: ['mkdir', '-p', '../b'] }); };\n`);
  const state = rig.path('state');
  expect((await rig.run(['apply', '-f', 'a/Nodefile.ts', '--state-dir', state])).code).toBe(0);
  rig.write('b/Nodefile.ts', `export default (ng: any) => {};\n`);
  const destroy = await rig.run(['destroy', '--yes', '-f', 'b/Nodefile.ts', '--state-dir', state]);
  expect(destroy.code).toBe(0);
  expect(destroy.stdout).toContain(`warning: made: kept ${rig.path('b')}, which is the Nodefile's folder: destroying the task would remove the project`);
  expect(existsSync(rig.path('b/Nodefile.ts'))).toBe(true);
});

test('a task still declared is stopped and destroyed by the actions it declares now, not those recorded', async () => {
  rig.nodefile(`  ng.task('svc', { outputs: ['out'], run: ['touch', 'out'], destroy: ['false'] });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  expect((await rig.run(['destroy', '--yes'])).code).toBe(1);
  // The fix needs no apply: a destroy action is not part of what the task does. The failed destroy may have
  // undone part of it, so the task is no longer trusted as applied: an apply would do it again.
  rig.nodefile(`  ng.task('svc', { outputs: ['out'], run: ['touch', 'out'], stop: ['sh', '-c', 'echo stopped > stop.log'], destroy: ['true'] });`);
  expect((await rig.run(['plan'])).stdout).toContain('svc  update  last run failed: a destroy was begun and did not finish');
  expect((await rig.run(['stop'])).code).toBe(0);
  expect(rig.read('stop.log')).toBe('stopped\n');
  const destroy = await rig.run(['destroy', '--yes']);
  expect(destroy.code).toBe(0);
  expect(rig.exists('out')).toBe(false);
});

test('an output a task no longer declares is removed once it ran again, unless another task declares it or the task keeps its outputs', async () => {
  rig.nodefile(`
    ng.task('dropin', { outputs: ['out/10-old.conf'], run: ['sh', '-c', 'echo a > out/10-old.conf'] });
    ng.task('shared', { outputs: ['out/shared-old'], run: ['sh', '-c', 'echo s > out/shared-old'], removeOutputs: false });
    ng.task('moved', { outputs: ['out/moving'], run: ['sh', '-c', 'echo m > out/moving'] });
  `);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.nodefile(`
    ng.task('dropin', { outputs: ['out/20-new.conf'], run: ['sh', '-c', 'echo a > out/20-new.conf'] });
    ng.task('shared', { outputs: ['out/shared-new'], run: ['sh', '-c', 'echo s > out/shared-new'], removeOutputs: false });
    ng.task('moved', { outputs: ['out/moved'], run: ['sh', '-c', 'echo m > out/moved'] });
    ng.task('owner', { outputs: ['out/moving'], run: ['sh', '-c', 'echo o > out/moving'] });
  `);
  const apply = await rig.run(['apply', '-j', '1']);
  expect(apply.code).toBe(0);
  expect(apply.stdout).toContain('  dropin: removed out/10-old.conf, no longer one of its outputs\n');
  expect(rig.exists('out/10-old.conf')).toBe(false);
  expect(rig.exists('out/20-new.conf')).toBe(true);
  // removeOutputs: false keeps what the task made, now as before.
  expect(rig.exists('out/shared-old')).toBe(true);
  // Another task declares it now: it stays theirs.
  expect(apply.stdout).toContain(`  moved: kept out/moving, no longer one of its outputs, which is now owner's output\n`);
  expect(rig.read('out/moving')).toBe('o\n');
});

test("removeOutputs: 'dropped' removes what the task no longer declares, and keeps its outputs on destroy", async () => {
  rig.nodefile(`ng.task('shared', { outputs: ['out/old'], run: ['sh', '-c', 'echo s > out/old'], removeOutputs: 'dropped' });`);
  expect((await rig.run(['apply'])).code).toBe(0);
  rig.nodefile(`ng.task('shared', { outputs: ['out/new'], run: ['sh', '-c', 'echo s > out/new'], removeOutputs: 'dropped' });`);
  const apply = await rig.run(['apply']);
  expect(apply.code).toBe(0);
  expect(apply.stdout).toContain('  shared: removed out/old, no longer one of its outputs\n');
  expect(rig.exists('out/old')).toBe(false);
  expect((await rig.run(['destroy', '--yes'])).code).toBe(0);
  expect(rig.read('out/new')).toBe('s\n');
});

test('a project copied with its state: applying the copy leaves the files of the original alone', async () => {
  rig.write('a/in.txt', 'x\n');
  rig.write('a/Nodefile.ts', `export default (ng: any) => { ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/x'], run: ['sh', '-c', 'mkdir -p out && cp in.txt out/x'] }); };\n`);
  expect((await rig.run(['apply', '-f', 'a/Nodefile.ts'])).code).toBe(0);
  cpSync(rig.path('a'), rig.path('b'), { recursive: true });
  // The copy's records name a/out/x, which its task no longer declares (it writes b/out/x).
  const copy = await rig.run(['apply', '-f', 'b/Nodefile.ts']);
  expect(copy.code).toBe(0);
  expect(copy.stdout).toContain(`  copy: kept ../a/out/x, no longer one of its outputs, which lies in ${rig.path('a')}, where the task last ran, outside this project`);
  expect(rig.read('a/out/x')).toBe('x\n');
  expect(rig.read('b/out/x')).toBe('x\n');
  // Within a project, a stale output still goes (the test above).
});

test('a targeted destroy removes an output that lies in a folder a staying task declares', async () => {
  rig.nodefile(`
    const layout = ng.task('layout', { outputs: ['var/containers'], run: ['mkdir', '-p', 'var/containers'] });
    ng.task('kube1/rootfs', { after: [layout], outputs: ['var/containers/kube1'], run: ['mkdir', '-p', 'var/containers/kube1'] });
    ng.task('kube2/rootfs', { after: [layout], outputs: ['var/containers/kube2'], run: ['mkdir', '-p', 'var/containers/kube2'] });
  `);
  expect((await rig.run(['apply'])).code).toBe(0);
  const destroy = await rig.run(['destroy', '--yes', 'kube1/*']);
  expect(destroy.code).toBe(0);
  expect(destroy.stdout).not.toContain('warning');
  expect(rig.exists('var/containers/kube1')).toBe(false);
  expect(rig.exists('var/containers/kube2')).toBe(true);
  expect(rig.exists('var/containers')).toBe(true);
});

test('an output that leads to the project through a symlink is not removed by destroy', async () => {
  rig.write('project/precious.txt', 'keep\n');
  symlinkSync('..', rig.path('project/up'));
  rig.write('project/Nodefile.ts', `export default (ng: any) => { ng.task('t', { outputs: ['up/project'], run: ['true'] }); };\n`);
  expect((await rig.run(['apply', '-f', 'project/Nodefile.ts'])).code).toBe(0);
  const destroy = await rig.run(['destroy', '--yes', '-f', 'project/Nodefile.ts']);
  expect(destroy.code).toBe(0);
  expect(destroy.stdout).toContain(
    `warning: t: kept ${rig.path('project/up/project')}, which leads to ${rig.path('project')}, which is the Nodefile's folder: destroying the task would remove the project`,
  );
  expect(rig.read('project/precious.txt')).toBe('keep\n');
});

test('the same project reached through a symlinked folder is the same graph: nothing to do, nothing removed', async () => {
  rig.write('real/Nodefile.ts', `export default (ng: any) => { ng.task('a', { outputs: ['out/a.txt'], run: ['sh', '-c', 'mkdir -p out && echo a > out/a.txt'] }); };\n`);
  symlinkSync(rig.path('real'), rig.path('link'));
  expect((await rig.run(['apply', '-f', 'real/Nodefile.ts'])).code).toBe(0);
  const again = await rig.run(['apply', '-f', 'link/Nodefile.ts']);
  expect(again.code).toBe(0);
  expect(again.stdout).toContain('No changes: 1 task up to date.');
  expect(rig.read('real/out/a.txt')).toBe('a\n');
});
