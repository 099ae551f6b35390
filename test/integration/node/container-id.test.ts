// The container id (`containerId`): runc's name for a slot's container and
// its unit's, so two nodes can share one host.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { validateNodeConfig } from '../../../graphs/node-config.ts';
import { applyNodefile } from '../../../src/apply.ts';
import { teardownNodefile } from '../../../src/operations.ts';
import { makeRig, NODEFILE, ok, type Rig } from '../../support/node/graph-rig.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

describe('the container id', () => {
  it('is the slot by default', async () => {
    rig = makeRig();
    ok(await rig.apply());
    expect([...rig.runner.containers.keys()]).toEqual(['kube1']);
  });

  it('names the container, the commands inside it and its unit; each slot fills in {slot}', async () => {
    rig = makeRig({ containerId: 'node-a-{slot}', supervisor: 'auto', prepare: ['kube2'] });
    mkdirSync(path.join(rig.root, 'run/systemd/system'), { recursive: true });
    ok(await rig.apply());
    expect([...rig.runner.containers.keys()]).toEqual(['node-a-kube1']);
    const inside = rig.runner.commands().filter((c) => c.includes(' exec '));
    expect(inside.length).toBeGreaterThan(0);
    expect(inside.filter((c) => !c.includes(' exec node-a-kube1 '))).toEqual([]);
    const unit = readFileSync(path.join(rig.root, 'etc/systemd/system/nodegraph-node-a-kube1.service'), 'utf8');
    expect(unit).toContain(`run --bundle ${rig.root}/var/lib/nodegraph/containers/kube1 node-a-kube1`);
    // The prepared slot's unit is its own: both slots' units can be on the host at once.
    expect(existsSync(path.join(rig.root, 'etc/systemd/system/nodegraph-node-a-kube2.service'))).toBe(true);
    // Tasks keep the slot's name.
    expect(ok(await rig.plan()).plan.entries().map((e) => String(e.id))).toContain('kube1/container');
    rig.runner.reset();
    expect(ok(await rig.destroy()).failed).toEqual([]);
    expect(rig.runner.containers.size).toBe(0);
    expect(rig.runner.events).toContainEqual({ kind: 'host-unit', verb: 'stop', unit: 'nodegraph-node-a-kube1.service' });
  });

  it('lets two nodes share one host: each starts, stops and goes by its own id', async () => {
    rig = makeRig({ containerId: 'a-{slot}' });
    // Node b: its own configuration, root prefix and state, on the same host (the same runc).
    const bRoot = path.join(rig.root, 'node-b');
    const bConfig = path.join(rig.dir, 'node-b.json');
    writeFileSync(bConfig, JSON.stringify({ ...rig.config, nodeName: 'node-b', root: bRoot, containerId: 'b-{slot}' }));
    const nodeB = { nodefile: NODEFILE, stateDir: path.join(rig.dir, 'state-b'), runner: rig.runner, jobs: 4 };
    const asB = async <T>(f: () => Promise<T>): Promise<T> => {
      process.env['NODEGRAPH_NODE_CONFIG'] = bConfig;
      try {
        return await f();
      } finally {
        process.env['NODEGRAPH_NODE_CONFIG'] = rig.configFile;
      }
    };

    ok(await rig.apply());
    expect(ok(await asB(() => applyNodefile(nodeB))).failed).toEqual([]);
    const running = [...rig.runner.containers].map(([id, c]) => `${id} ${c.status} ${path.relative(rig.root, c.bundle)}`);
    expect(running).toEqual(['a-kube1 running var/lib/nodegraph/containers/kube1', 'b-kube1 running node-b/var/lib/nodegraph/containers/kube1']);

    expect(ok(await asB(() => teardownNodefile({ ...nodeB, mode: 'destroy' }))).failed).toEqual([]);
    expect([...rig.runner.containers.keys()]).toEqual(['a-kube1']);
    rig.runner.reset();
    expect(ok(await rig.apply()).ran).toEqual([]);
  });

  it('changed on a running node, stops the container by its old id before starting it by the new', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, containerId: 'node-a-{slot}' }));
    rig.runner.reset();
    ok(await rig.apply());
    expect([...rig.runner.containers.keys()]).toEqual(['node-a-kube1']);
    const moves = rig.runner.events.filter((e) => e.kind === 'container-start' || e.kind === 'container-stop');
    expect(moves).toEqual([
      { kind: 'container-stop', id: 'kube1' },
      { kind: 'container-start', id: 'node-a-kube1' },
    ]);
  });

  it('changed on a systemd host, stops and disables the old unit: only the new one starts the slot at boot', async () => {
    rig = makeRig({ supervisor: 'systemd' });
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, containerId: 'node-a-{slot}' }));
    rig.runner.reset();
    ok(await rig.apply());
    expect([...rig.runner.containers.keys()]).toEqual(['node-a-kube1']);
    expect(rig.runner.hostUnits.get('nodegraph-kube1.service')).toEqual({ enabled: false });
    expect(rig.runner.hostUnits.get('nodegraph-node-a-kube1.service')).toEqual({ enabled: true });
  });

  it("moved to another runc state folder on a systemd host, stops the unit before the container under the old folder, and keeps it enabled", async () => {
    rig = makeRig({ supervisor: 'systemd' });
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, runtime: { runc: '/usr/sbin/runc', stateRoot: '/run/runc-node' } }));
    rig.runner.reset();
    ok(await rig.apply());
    const host = rig.runner.events.flatMap((e) => (e.kind === 'host-unit' && e.verb !== 'daemon-reload' ? [`${e.verb} ${e.unit}`] : []));
    expect(host).toEqual(['stop nodegraph-kube1.service', 'enable nodegraph-kube1.service', 'restart nodegraph-kube1.service']);
    expect(rig.runner.hostUnits.get('nodegraph-kube1.service')).toEqual({ enabled: true });
  });

  it('is refused when it would not tell the slots apart or runc could not take it', () => {
    const base = { ...makeRig().config };
    rig.cleanup();
    const errors = (containerId: string): string[] => {
      const checked = validateNodeConfig({ ...base, containerId });
      return checked.ok ? [] : checked.error;
    };
    const message = 'containerId: letters, digits and _.- around {slot}, which each slot fills in (node-a-{slot})';
    expect(errors('node-a')).toEqual([message]);
    expect(errors('node a-{slot}')).toEqual([message]);
    expect(errors('{slot}/x')).toEqual([message]);
    expect(errors('node-a.{slot}_1')).toEqual([]);
  });
});
