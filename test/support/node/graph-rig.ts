// A rig for running graphs/container-node.ts through the engine against a
// temporary root with the fake runner: no root, no runc, in milliseconds.

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeConfigInput } from '../../../graphs/node-config.ts';
import { applyNodefile } from '../../../src/apply.ts';
import { planNodefile, teardownNodefile } from '../../../src/operations.ts';
import type { EngineEvent } from '../../../src/events.ts';
import { FakeRunner, type FakeRunnerOptions } from '../fake-runner.ts';

export const NODEFILE = fileURLToPath(new URL('../../../graphs/container-node.ts', import.meta.url));

export const CA = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';

export interface Rig {
  readonly dir: string;
  readonly root: string;
  readonly configFile: string;
  readonly runner: FakeRunner;
  readonly events: EngineEvent[];
  config: NodeConfigInput;
  writeConfig(change?: (c: NodeConfigInput) => NodeConfigInput): void;
  apply(more?: RunMore): ReturnType<typeof applyNodefile>;
  plan(more?: RunMore): ReturnType<typeof planNodefile>;
  destroy(): ReturnType<typeof teardownNodefile>;
  stop(): ReturnType<typeof teardownNodefile>;
  cleanup(): void;
}

/** Engine options a test adds to a run: `--replace ID`, targets, `--no-atomic`. */
export interface RunMore {
  readonly replace?: readonly string[];
  readonly targets?: readonly string[];
  readonly atomic?: boolean;
}

export function makeImage(dir: string, name = 'image.tar.gz', marker = 'one'): string {
  const tree = path.join(dir, `${name}.tree`);
  mkdirSync(path.join(tree, 'sbin'), { recursive: true });
  mkdirSync(path.join(tree, 'etc'), { recursive: true });
  writeFileSync(path.join(tree, 'sbin/init'), '#!/bin/sh\n');
  writeFileSync(path.join(tree, 'etc/os-release'), `ID=fake\nBUILD=${marker}\n`);
  const archive = path.join(dir, name);
  execFileSync('tar', ['-czf', archive, '-C', tree, '.']);
  rmSync(tree, { recursive: true });
  return archive;
}

export function makeRig(
  overrides: Partial<NodeConfigInput> = {},
  fake: Pick<FakeRunnerOptions, 'missingModules' | 'builtinModules' | 'answer' | 'failingUnits'> = {},
): Rig {
  const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-node-'));
  const root = path.join(dir, 'root');
  mkdirSync(root);
  const image = makeImage(dir);
  const configFile = path.join(dir, 'node.json');
  const runner = new FakeRunner({
    sandbox: root,
    runcRoot: path.join(root, 'run/runc'),
    passthrough: (argv) => argv[0] === 'tar',
    ...fake,
  });
  const events: EngineEvent[] = [];
  const options = () => ({
    nodefile: NODEFILE,
    stateDir: path.join(dir, 'state'),
    runner,
    jobs: 4,
    onEvent: (e: EngineEvent) => events.push(e),
  });
  const rig: Rig = {
    dir,
    root,
    configFile,
    runner,
    events,
    config: {
      nodeName: 'node-a',
      cluster: { server: 'https://10.0.0.1:6443', caData: CA, bootstrapToken: 'abcdef.0123456789abcdef' },
      clusterDNS: ['10.96.0.10'],
      kubernetesVersion: 'v1.30.2',
      image,
      slot: 'kube1',
      root,
      supervisor: 'runc',
      registryMirrors: { 'docker.io': ['https://mirror.example.com'] },
      gpu: 'off',
      // No host has this module: modprobe (the fake's) is always asked, whatever this machine's kernel holds.
      kernelModules: ['nodegraph_fake_module'],
      timeouts: { systemd: 1, service: 1, stop: 1, interval: 0.01, healthy: 0 },
      ...overrides,
    },
    writeConfig(change) {
      if (change !== undefined) rig.config = change(rig.config);
      writeFileSync(configFile, `${JSON.stringify(rig.config, null, 2)}\n`);
    },
    apply: (more = {}) => applyNodefile({ ...options(), ...more }),
    plan: (more = {}) => planNodefile({ ...options(), ...more }),
    destroy: () => teardownNodefile({ ...options(), mode: 'destroy' }),
    stop: () => teardownNodefile({ ...options(), mode: 'stop' }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
  rig.writeConfig();
  process.env['NODEGRAPH_NODE_CONFIG'] = configFile;
  return rig;
}

/** The value of an engine result, or a thrown error that shows the failures. */
export const ok = <T>(result: { ok: true; value: T } | { ok: false; error: unknown }): T => {
  if (!result.ok) throw new Error(`engine failed: ${JSON.stringify(result.error, null, 2)}`);
  return result.value;
};
