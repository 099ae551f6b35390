// Nodefile.example.ts, copied into a temporary folder and run as a user
// would: it unpacks the image, renders both configurations, starts both
// stand-in services with start-stop-daemon, restarts only the one whose
// configuration changed, and destroy removes all of it.

import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { alive, repo, Rig } from '../support/rig.ts';

let rig: Rig;
beforeAll(() => {
  rig = new Rig('nodegraph-example-');
  cpSync(path.join(repo, 'example'), rig.path('example'), { recursive: true });
  // The example's type import points into the checkout's sources.
  const source = readFileSync(path.join(repo, 'Nodefile.example.ts'), 'utf8').replace("'./src/nodefile/types.ts'", JSON.stringify(path.join(repo, 'src/nodefile/types.ts')));
  writeFileSync(rig.path('Nodefile.example.ts'), source);
});
afterAll(async () => {
  await rig.run(['destroy', '-f', 'Nodefile.example.ts', '--yes']);
  rig.cleanup();
});

const pid = (name: string): number => Number(readFileSync(rig.path(`example-node/run/${name}.pid`), 'utf8'));
const settings = (): { containerd: { logLevel: string }; kubelet: { maxPods: number } } =>
  JSON.parse(readFileSync(rig.path('example/settings.json'), 'utf8')) as { containerd: { logLevel: string }; kubelet: { maxPods: number } };

test('first apply unpacks, renders and starts both services', async () => {
  const result = await rig.run(['apply', '-f', 'Nodefile.example.ts']);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  expect(readFileSync(rig.path('example-node/rootfs/etc/os-release'), 'utf8')).toContain('nodegraph example image');
  expect(readFileSync(rig.path('example-node/etc/containerd.toml'), 'utf8')).toContain('level = "info"');
  expect(readFileSync(rig.path('example-node/etc/kubelet.yaml'), 'utf8')).toContain('maxPods: 110');
  expect(alive(pid('containerd'))).toBe(true);
  expect(alive(pid('kubelet'))).toBe(true);
  // Everything it wrote is below example-node/ (and its state beside the Nodefile).
  expect(readdirSync(rig.dir).sort()).toEqual(['.nodegraph', 'Nodefile.example.ts', 'example', 'example-node']);
});

test('a second apply does nothing', async () => {
  const before = [pid('containerd'), pid('kubelet')];
  const result = await rig.run(['apply', '-f', 'Nodefile.example.ts']);
  expect(result.stdout).toContain('No changes: 7 tasks up to date.');
  expect([pid('containerd'), pid('kubelet')]).toEqual(before);
});

test("editing containerd's configuration restarts containerd alone; plan says so first", async () => {
  const containerd = pid('containerd');
  const kubelet = pid('kubelet');
  const s = settings();
  s.containerd.logLevel = 'debug';
  writeFileSync(rig.path('example/settings.json'), JSON.stringify(s));
  const plan = await rig.run(['plan', '-f', 'Nodefile.example.ts']);
  expect(plan.stdout).toMatch(/~ containerd\/config\s+update\s+input settings changed/);
  expect(plan.stdout).toMatch(/\? containerd\/service\s+may restart\s+known after containerd\/config/);
  expect(plan.stdout).not.toContain('kubelet');
  expect((await rig.run(['apply', '-f', 'Nodefile.example.ts'])).code).toBe(0);
  expect(pid('containerd')).not.toBe(containerd);
  expect(alive(containerd)).toBe(false);
  expect(alive(pid('containerd'))).toBe(true);
  expect(pid('kubelet')).toBe(kubelet);
});

test("editing kubelet's configuration restarts kubelet alone", async () => {
  const containerd = pid('containerd');
  const kubelet = pid('kubelet');
  const s = settings();
  s.kubelet.maxPods = 50;
  writeFileSync(rig.path('example/settings.json'), JSON.stringify(s));
  expect((await rig.run(['apply', '-f', 'Nodefile.example.ts'])).code).toBe(0);
  expect(pid('kubelet')).not.toBe(kubelet);
  expect(pid('containerd')).toBe(containerd);
});

test('a configuration containerd would refuse fails the apply, which is rolled back: settings.json as it was, containerd untouched', async () => {
  const containerd = pid('containerd');
  const before = readFileSync(rig.path('example/settings.json'), 'utf8');
  const s = settings();
  s.containerd.logLevel = 'loud';
  writeFileSync(rig.path('example/settings.json'), JSON.stringify(s));
  const plan = await rig.run(['plan', '-f', 'Nodefile.example.ts']);
  expect(plan.stdout).toMatch(/\nAtomic: preserves no path; if a task fails or a check fails after it, it falls back to generation 3\.\n$/);
  const result = await rig.run(['apply', '-f', 'Nodefile.example.ts']);
  expect(result.code).toBe(1);
  expect(result.stdout).toContain('containerd/config failed: containerd.logLevel must be one of trace, debug, info, warn, error, fatal, panic, not "loud"');
  expect(result.stderr).toBe(
    'error[atomic-apply-failed]: containerd/config failed: rolled back to generation 3, and the rollback succeeded; the failed change is kept as generation 4 (`nodegraph rollback 4` applies it again)\n',
  );
  expect(readFileSync(rig.path('example/settings.json'), 'utf8')).toBe(before);
  expect(pid('containerd')).toBe(containerd);
  expect((await rig.run(['plan', '-f', 'Nodefile.example.ts', '--detailed-exitcode'])).code).toBe(0);
});

test('a service that died is drift: apply starts it again', async () => {
  const kubelet = pid('kubelet');
  process.kill(kubelet, 'SIGKILL');
  // Until init has reaped it, a killed process is still there (a zombie), and the example's check still sees it.
  const present = (p: number): boolean => {
    try {
      process.kill(p, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 200 && present(kubelet); i++) await new Promise((r) => setTimeout(r, 50));
  const plan = await rig.run(['plan', '-f', 'Nodefile.example.ts']);
  expect(plan.stdout).toMatch(/! kubelet\/service\s+restart\s+check failed/);
  await rig.run(['apply', '-f', 'Nodefile.example.ts']);
  expect(alive(pid('kubelet'))).toBe(true);
});

test('destroy --yes stops both services and removes all of it', async () => {
  const pids = [pid('containerd'), pid('kubelet')];
  const result = await rig.run(['destroy', '-f', 'Nodefile.example.ts', '--yes']);
  expect(result.code).toBe(0);
  expect(existsSync(rig.path('example-node'))).toBe(false);
  for (const p of pids) expect(alive(p)).toBe(false);
});

test('destroy run again over what it had already removed (a destroy cut short after its action) finishes: no step fails for a folder already gone', async () => {
  expect((await rig.run(['apply', '-f', 'Nodefile.example.ts'])).code).toBe(0);
  const pids = [pid('containerd'), pid('kubelet')];
  expect((await rig.run(['stop', '-f', 'Nodefile.example.ts'])).code).toBe(0);
  // What each destroy action removes, gone already, as a crash between the actions and their records leaves it.
  rmSync(rig.path('example-node'), { recursive: true });
  const result = await rig.run(['destroy', '-f', 'Nodefile.example.ts', '--yes']);
  expect(result.stdout).toMatch(/^Destroy: 7 destroyed, 0 failed/m);
  expect(result.code).toBe(0);
  for (const p of pids) expect(alive(p)).toBe(false);
  expect((await rig.run(['plan', '-f', 'Nodefile.example.ts'])).stdout).toMatch(/^Plan: 7 to create/m);
});

test('status says which services run; with the state lost, it names the traces, and destroy --traces tears them down', async () => {
  expect((await rig.run(['apply', '-f', 'Nodefile.example.ts'])).code).toBe(0);
  const status = await rig.run(['status', '-f', 'Nodefile.example.ts']);
  expect(status.stdout).toMatch(/^containerd\/service\s+running\s*$/m);
  expect(status.stdout).toMatch(/^node\/settings\s+applied\s*$/m);
  const pids = [pid('containerd'), pid('kubelet')];
  rmSync(rig.path('.nodegraph'), { recursive: true });
  const lost = await rig.run(['status', '-f', 'Nodefile.example.ts']);
  expect(lost.stdout).toMatch(/^containerd\/service\s+trace\s/m);
  expect(lost.stdout).toMatch(/^node\/layout\s+trace\s/m);
  expect(lost.stdout).toContain('found in place but not in the state (a state that was lost?): `nodegraph destroy --traces` tears them down.');
  const plain = await rig.run(['destroy', '-f', 'Nodefile.example.ts', '--yes']);
  expect(plain.stdout).toContain('Nothing to destroy');
  for (const p of pids) expect(alive(p)).toBe(true);
  const traced = await rig.run(['destroy', '-f', 'Nodefile.example.ts', '--yes', '--traces']);
  expect(traced.stderr).toBe('');
  expect(traced.stdout).toMatch(/^Destroy: 6 destroyed, 0 failed, 0 canceled, 0 kept in /m);
  expect(traced.code).toBe(0);
  for (const p of pids) expect(alive(p)).toBe(false);
  expect(existsSync(rig.path('example-node'))).toBe(false);
});
