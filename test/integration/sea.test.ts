// The single executable (npm run build:sea, scripts/build-sea.ts) on a host with no
// Node.js: PATH holds every program this machine has except node, npm and npx, and the
// Nodefiles lie in temporary folders with no node_modules anywhere above them.

import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { collect, repo } from '../support/rig.ts';

export const SEA = path.join(repo, 'dist', 'nodegraph');
const NODE_NAMES = new Set(['node', 'nodejs', 'npm', 'npx', 'corepack']);

let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(() => {
  // Built once per change of its inputs (dist/nodegraph.inputs): a cached build otherwise.
  execFileSync(process.execPath, [path.join(repo, 'scripts', 'build-sea.ts'), '--if-stale'], { stdio: 'inherit' });
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-sea-'));
  const bin = path.join(dir, 'bin');
  mkdirSync(bin);
  for (const folder of (process.env['PATH'] ?? '').split(':')) {
    if (!path.isAbsolute(folder) || !existsSync(folder) || !lstatSync(folder).isDirectory()) continue;
    for (const name of readdirSync(folder)) {
      if (NODE_NAMES.has(name) || existsSync(path.join(bin, name))) continue;
      symlinkSync(path.join(folder, name), path.join(bin, name));
    }
  }
  mkdirSync(path.join(dir, 'home'));
  env = { PATH: bin, HOME: path.join(dir, 'home'), LANG: 'C.UTF-8', CI: '1' };
}, 180_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sea = (args: string[], cwd: string, more: NodeJS.ProcessEnv = {}): ReturnType<typeof spawnSync> & { stdout: string; stderr: string } =>
  spawnSync(SEA, args, { cwd, env: { ...env, ...more }, encoding: 'utf8' });

test('the host has no node: PATH finds none, and no node_modules is above the folders', () => {
  expect(spawnSync('sh', ['-c', 'command -v node || command -v nodejs || command -v npx'], { env, encoding: 'utf8' }).status).not.toBe(0);
  for (let d = dir; d !== path.dirname(d); d = path.dirname(d)) expect(existsSync(path.join(d, 'node_modules')), d).toBe(false);
  expect(sea(['--version'], dir).stdout).toBe(`nodegraph ${(JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { version: string }).version}\n`);
});

/** A TypeScript Nodefile (types from 'nodegraph', which has none installed here): each task records the pid that started it. */
const NODEFILE = `import type { NodefileApi } from 'nodegraph';
interface Step { readonly name: string; readonly after?: string }
const steps: readonly Step[] = [{ name: 'a' }, { name: 'b', after: 'a' }, { name: 'c', after: 'b' }];
export default (ng: NodefileApi): void => {
  for (const step of steps) {
    ng.task(step.name, {
      outputs: [\`out/\${step.name}\`],
      ...(step.after === undefined ? {} : { after: [step.after] }),
      run: ['sh', '-c', \`echo $PPID > out/\${step.name}\`],
    });
  }
};
`;

/** Runs the executable to its end, with its pid: a task's $PPID is it when the engine spawns the task itself. */
async function applyWithPid(cwd: string, more: NodeJS.ProcessEnv = {}): Promise<{ pid: number; code: number | null; stdout: string }> {
  const child = spawn(SEA, ['apply'], { cwd, env: { ...env, ...more }, stdio: ['ignore', 'pipe', 'pipe'] });
  const pid = child.pid!;
  const result = await collect(child);
  return { pid, code: result.code, stdout: result.stdout };
}

test('plan, apply and destroy a TypeScript Nodefile, commands started by the spawnd carried inside', async () => {
  const work = path.join(dir, 'small');
  mkdirSync(work);
  writeFileSync(path.join(work, 'Nodefile.ts'), NODEFILE);
  const planned = sea(['plan'], work);
  expect(planned.stderr).toBe('');
  expect(planned.stdout).toContain('Plan: 3 to create, 0 to update, 0 to destroy; 0 unchanged.');
  expect(planned.status).toBe(0);

  const applied = await applyWithPid(work);
  expect(applied.stdout).toMatch(/Apply: 3 ran, 0 failed/);
  expect(applied.code).toBe(0);
  const parents = new Set(['a', 'b', 'c'].map((n) => readFileSync(path.join(work, 'out', n), 'utf8').trim()));
  // One spawnd started all three, and it is not the engine.
  expect(parents.size).toBe(1);
  expect([...parents][0]).not.toBe(String(applied.pid));
  const cached = readdirSync(path.join(env['HOME']!, '.cache', 'nodegraph'));
  expect(cached).toEqual([expect.stringMatching(/^spawnd-[0-9a-f]{16}$/)]);

  expect(sea(['apply'], work).stdout).toMatch(/Apply: 0 ran, 0 failed/);
  const destroyed = sea(['destroy', '--yes'], work);
  expect(destroyed.stdout).toMatch(/Destroy: 3 destroyed, 0 failed/);
  expect(destroyed.status).toBe(0);
  expect(existsSync(path.join(work, 'out', 'a'))).toBe(false);
});

test('where spawnd cannot be written, the engine spawns the commands itself', async () => {
  const work = path.join(dir, 'plain');
  mkdirSync(work);
  writeFileSync(path.join(work, 'Nodefile.ts'), NODEFILE);
  // A cache "folder" that is a file: nothing can be written below it.
  const blocked = path.join(dir, 'not-a-folder');
  writeFileSync(blocked, '');
  const applied = await applyWithPid(work, { XDG_CACHE_HOME: blocked });
  expect(applied.stdout).toMatch(/Apply: 3 ran, 0 failed/);
  expect(applied.code).toBe(0);
  for (const n of ['a', 'b', 'c']) expect(readFileSync(path.join(work, 'out', n), 'utf8').trim()).toBe(String(applied.pid));
});

test('graphs/container-node.ts plans from a copy of graphs/ and src/ with no node_modules (zod, yaml, smol-toml carried inside)', () => {
  const kit = path.join(dir, 'kit');
  for (const part of ['graphs', 'src']) cpSync(path.join(repo, part), path.join(kit, part), { recursive: true });
  const image = path.join(dir, 'image');
  mkdirSync(path.join(image, 'sbin'), { recursive: true });
  writeFileSync(path.join(image, 'sbin', 'init'), '#!/bin/sh\n');
  execFileSync('tar', ['-czf', path.join(dir, 'image.tar.gz'), '-C', image, '.']);
  const root = path.join(dir, 'root');
  mkdirSync(root);
  const config = path.join(dir, 'node.json');
  writeFileSync(
    config,
    JSON.stringify({
      nodeName: 'node-a',
      cluster: { server: 'https://10.0.0.1:6443', caData: '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n', bootstrapToken: 'abcdef.0123456789abcdef' },
      clusterDNS: ['10.96.0.10'],
      kubernetesVersion: 'v1.30.2',
      image: path.join(dir, 'image.tar.gz'),
      slot: 'kube1',
      root,
      supervisor: 'runc',
      gpu: 'off',
    }),
  );
  const planned = sea(['plan', '-f', 'graphs/container-node.ts', '--state-dir', path.join(dir, 'kit-state')], kit, { NODEGRAPH_NODE_CONFIG: config });
  expect(planned.stderr).toBe('');
  expect(planned.stdout).toMatch(/^Plan: 20 to create, 0 to update, 0 to destroy; 0 unchanged\.$/m);
  expect(planned.stdout).toContain('kube1/verified');
  expect(planned.status).toBe(0);
});

test('the example Nodefile plans from a copy with no node_modules', () => {
  const example = path.join(dir, 'example');
  mkdirSync(example);
  cpSync(path.join(repo, 'Nodefile.example.ts'), path.join(example, 'Nodefile.example.ts'));
  cpSync(path.join(repo, 'example'), path.join(example, 'example'), { recursive: true });
  // Its type import names the API's types by path.
  cpSync(path.join(repo, 'src', 'nodefile', 'types.ts'), path.join(example, 'src', 'nodefile', 'types.ts'));
  const planned = sea(['plan', '-f', 'Nodefile.example.ts'], example);
  expect(planned.stderr).toBe('');
  expect(planned.stdout).toContain('Plan: 7 to create, 0 to update, 0 to destroy; 0 unchanged.');
  expect(planned.status).toBe(0);
});

/** The YAML blocks of docs/kubernetes.md, parsed. */
function kubernetesDoc(): Record<string, unknown>[] {
  const text = readFileSync(path.join(repo, 'docs', 'kubernetes.md'), 'utf8');
  const blocks = [...text.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  expect(blocks.length).toBe(2);
  return blocks.map((b) => parseYaml(b, { strict: true, uniqueKeys: true }) as Record<string, unknown>);
}

test("docs/kubernetes.md: the Plan parses and asks for one node at a time, cordon, drain, the version as the images' tag; its command line runs", () => {
  const [plan, job] = kubernetesDoc() as [
    { apiVersion: string; kind: string; spec: { version: string; concurrency: number; cordon: boolean; drain: { force: boolean }; upgrade: { image: string; command: string[]; args: string[]; envs: { name: string; value: string }[] }; prepare: { image: string } } },
    { kind: string; spec: { template: { spec: { containers: { image: string }[]; initContainers: { image: string }[] } } } },
  ];
  expect(plan.apiVersion).toBe('upgrade.cattle.io/v1');
  expect(plan.kind).toBe('Plan');
  expect(plan.spec.concurrency).toBe(1);
  expect(plan.spec.cordon).toBe(true);
  expect(plan.spec.drain.force).toBe(true);
  expect(plan.spec.version).toMatch(/^[0-9a-f]{16}$/);
  // The job's images are the Plan's, tagged with its version.
  expect(job.kind).toBe('Job');
  expect(job.spec.template.spec.initContainers[0]!.image).toBe(`${plan.spec.prepare.image}:${plan.spec.version}`);
  expect(job.spec.template.spec.containers[0]!.image).toBe(`${plan.spec.upgrade.image}:${plan.spec.version}`);
  // Against the host root: chroot, then the executable's own arguments.
  expect(plan.spec.upgrade.command).toEqual(['chroot', '/host']);
  const [exe, ...args] = plan.spec.upgrade.args;
  expect(args.slice(0, 2)).toEqual(['apply', '--atomic']);

  // The same command line here, each absolute path moved below a folder standing for the host's root,
  // the Nodefile in place of the container node's graph (it needs runc and root).
  const host = path.join(dir, 'host');
  const moved = (p: string): string => (path.isAbsolute(p) ? path.join(host, p) : p);
  const nodefile = moved(args[args.indexOf('-f') + 1]!);
  mkdirSync(path.dirname(nodefile), { recursive: true });
  writeFileSync(nodefile, NODEFILE);
  mkdirSync(path.dirname(moved(args[args.indexOf('--metrics-file') + 1]!)), { recursive: true });
  mkdirSync(path.dirname(moved(exe!)), { recursive: true });
  cpSync(SEA, moved(exe!));
  const planEnv = Object.fromEntries(plan.spec.upgrade.envs.map((e) => [e.name, moved(e.value)]));
  for (const round of ['converges', 'has nothing to do']) {
    const ran = spawnSync(moved(exe!), args.map(moved), { cwd: host, env: { ...env, ...planEnv }, encoding: 'utf8' });
    expect(ran.stderr, round).toBe('');
    expect(ran.stdout, round).toMatch(round === 'converges' ? /Apply: 3 ran, 0 failed/ : /Apply: 0 ran, 0 failed/);
    expect(ran.status, round).toBe(0);
  }
  expect(existsSync(path.join(moved(args[args.indexOf('--state-dir') + 1]!), 'generations', 'current'))).toBe(true);
  const metrics = readFileSync(moved(args[args.indexOf('--metrics-file') + 1]!), 'utf8');
  expect(metrics).toMatch(/^nodegraph_last_run_outcome\{command="apply",outcome="success"\} 1$/m);
  expect(metrics).toMatch(/^nodegraph_generation 1$/m);
});
