import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRig, ok, type Rig } from '../../support/node/graph-rig.ts';
import type { FakeEvent } from '../../support/fake-runner.ts';
import { story as storyOf } from '../../support/node/story.ts';

let rig: Rig;
afterEach(() => rig?.cleanup());

/** The events these tests follow, as short words (test/support/node/story.ts). */
const FOLLOWED = new Set<FakeEvent['kind']>(['container-start', 'container-stop', 'service-start', 'service-boot', 'service-restart', 'service-stop', 'host-unit']);
const story = (events: readonly FakeEvent[]): string[] => storyOf(events, FOLLOWED);

describe('the container node, further', () => {
  it('on a host with systemd, keeps the container in a unit and removes the unit on destroy', async () => {
    rig = makeRig({ supervisor: 'auto' });
    mkdirSync(path.join(rig.root, 'run/systemd/system'), { recursive: true });
    const summary = ok(await rig.apply());
    expect(summary.ran).toContain('kube1/unit');
    const unit = path.join(rig.root, 'etc/systemd/system/nodegraph-kube1.service');
    expect(readFileSync(unit, 'utf8')).toContain(`ExecStart=/usr/sbin/runc --root ${rig.root}/run/runc run --bundle ${rig.root}/var/lib/nodegraph/containers/kube1 kube1`);
    expect(story(rig.runner.events)).toEqual([
      'host daemon-reload',
      'host daemon-reload',
      'host enable nodegraph-kube1.service',
      'host restart nodegraph-kube1.service',
      'container-start kube1',
      'start containerd',
      'start kubelet',
    ]);
    rig.runner.reset();
    ok(await rig.apply());
    expect(story(rig.runner.events)).toEqual([]);
    rig.runner.reset();
    const destroyed = ok(await rig.destroy());
    expect(destroyed.failed).toEqual([]);
    expect(story(rig.runner.events)).toEqual([
      'stop kubelet',
      'stop containerd',
      'host stop nodegraph-kube1.service',
      'container-stop kube1',
      'host disable nodegraph-kube1.service',
      'host remove nodegraph-kube1.service',
      // The rootfs goes only once nothing runs from it: its container stopped by id again (a no-op here).
      'host stop nodegraph-kube1.service',
    ]);
    expect(existsSync(unit)).toBe(false);
  });

  it('prepares another slot beside the running one without starting it', async () => {
    rig = makeRig({ prepare: ['kube2'] });
    const summary = ok(await rig.apply());
    expect(summary.ran).toEqual(expect.arrayContaining(['kube2/rootfs', 'kube2/bundle']));
    expect(summary.ran.filter((id) => id.startsWith('kube2/'))).toEqual(['kube2/rootfs', 'kube2/bundle']);
    expect([...rig.runner.containers.keys()]).toEqual(['kube1']);
    expect(existsSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube2/rootfs/sbin/init'))).toBe(true);
  });

  it('installs a configured kubelet binary, and restarts only kubelet when its version changes', async () => {
    rig = makeRig();
    const binary = (v: string): string => {
      const file = path.join(rig.dir, `kubelet-${v}`);
      writeFileSync(file, `#!/bin/sh\necho ${v}\n`);
      return file;
    };
    rig.writeConfig((c) => ({ ...c, binaries: { kubelet: { source: binary('v1.30.2') } } }));
    ok(await rig.apply());
    const installed = path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs/usr/local/bin/kubelet');
    expect(readFileSync(installed, 'utf8')).toContain('v1.30.2');
    rig.writeConfig((c) => ({ ...c, kubernetesVersion: 'v1.30.3', binaries: { kubelet: { source: binary('v1.30.3') } } }));
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.ran).toContain('kube1/provision.kubelet');
    expect(story(rig.runner.events)).toEqual(['restart kubelet']);
    expect(readFileSync(installed, 'utf8')).toContain('v1.30.3');
  });

  it('stops services before the container, keeps the files, and stopping a stopped node succeeds', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.runner.reset();
    const stopped = ok(await rig.stop());
    expect(stopped.failed).toEqual([]);
    expect(story(rig.runner.events)).toEqual(['stop kubelet', 'stop containerd', 'container-stop kube1']);
    expect(existsSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs/sbin/init'))).toBe(true);
    expect(existsSync(path.join(rig.root, 'var/lib/kubelet/config.yaml'))).toBe(true);
    rig.runner.reset();
    const again = ok(await rig.stop());
    expect(again.failed).toEqual([]);
    expect(story(rig.runner.events)).toEqual([]);
    // It comes back in place: the container and its services start, nothing is unpacked again.
    rig.runner.reset();
    const back = ok(await rig.apply());
    expect(back.ran).not.toContain('kube1/rootfs');
    expect(story(rig.runner.events)).toEqual(['container-start kube1', 'boot containerd', 'boot kubelet']);
  });

  it('fails the apply with the last probe output when kubelet does not come up', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, clusterDNS: ['10.96.0.99'] }));
    const kubelet = () => rig.runner.containers.get('kube1')!.services.get('kubelet')!;
    // Scripted: the restart "works" but the unit then fails.
    const original = rig.runner.run.bind(rig.runner);
    rig.runner.run = async (command, options) => {
      const result = await original(command, options);
      if (Array.isArray(command) && command.includes('restart') && command.includes('kubelet')) kubelet().active = false;
      return result;
    };
    // Not atomic: the failure as it is left, not undone.
    const summary = ok(await rig.apply({ atomic: false }));
    expect(summary.failed).toEqual(['kube1/kubelet']);
    const done = rig.events.find((e) => e.type === 'task-done' && e.id === 'kube1/kubelet' && e.outcome === 'failed');
    expect(done && 'error' in done && done.error).toMatch(/timed out after .* waiting for kubelet in kube1; last probe: kubelet is inactive/);
  });

  it('switches slots: the old slot stops before the new one starts and is kept in place, shared files stay', async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, slot: 'kube2' }));
    const plan = ok(await rig.plan()).plan;
    // Retired by stopping (retire: 'stop'): what has something to stop is stopped, the rest kept as it is.
    expect(plan.entries().filter((e) => e.action === 'destroy').map((e) => `${String(e.id)}: ${e.verb}`)).toEqual(
      expect.arrayContaining(['kube1/kubelet: stop', 'kube1/containerd: stop', 'kube1/container: stop']),
    );
    expect(plan.entries().filter((e) => e.action === 'destroy' && e.verb !== 'stop')).toEqual([]);
    rig.runner.reset();
    const summary = ok(await rig.apply());
    expect(summary.failed).toEqual([]);
    expect(story(rig.runner.events)).toEqual([
      'stop kubelet',
      'stop containerd',
      'container-stop kube1',
      'container-start kube2',
      'start containerd',
      'start kubelet',
    ]);
    expect([...rig.runner.containers.keys()]).toEqual(['kube2']);
    expect(existsSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs/sbin/init'))).toBe(true);
    expect(existsSync(path.join(rig.root, 'var/lib/kubelet/config.yaml'))).toBe(true);
    expect(existsSync(path.join(rig.root, 'etc/containerd/certs.d/docker.io/hosts.toml'))).toBe(true);
  });

  it("mounts containerd's certs.d where its settings put it, the folder its registry hosts are written to", async () => {
    rig = makeRig({ containerd: { certsDir: '/etc/containerd/registries' } });
    ok(await rig.apply());
    const hostDir = path.join(rig.root, 'etc/containerd/registries');
    expect(existsSync(path.join(hostDir, 'docker.io/hosts.toml'))).toBe(true);
    const config = JSON.parse(readFileSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/config.json'), 'utf8'));
    const mounts = config.mounts.filter((m: { destination: string }) => m.destination.startsWith('/etc/containerd/'));
    expect(mounts).toEqual([{ destination: '/etc/containerd/registries', type: 'bind', source: hostDir, options: ['rbind', 'rw'] }]);
    const toml = readFileSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs/etc/containerd/config.toml'), 'utf8');
    expect(toml).toContain('config_path = "/etc/containerd/registries"');
  });

  it("takes an extra bind mount's relative source from the configuration's folder, as every relative file name", async () => {
    rig = makeRig({
      bundle: {
        extraMounts: [
          { destination: '/srv/data', type: 'bind', source: 'data dir', options: ['rbind', 'ro'] },
          { destination: '/scratch', type: 'tmpfs', source: 'tmpfs' },
        ],
      },
    });
    ok(await rig.apply());
    const config = JSON.parse(readFileSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/config.json'), 'utf8'));
    const mount = (destination: string) => config.mounts.find((m: { destination: string }) => m.destination === destination);
    expect(mount('/srv/data').source).toBe(path.join(rig.dir, 'data dir'));
    expect(mount('/scratch').source).toBe('tmpfs');
  });

  it("keeps kubelet's credentials out of the plan and the state: a new token is applied, shown only as changed", async () => {
    rig = makeRig();
    ok(await rig.apply());
    rig.writeConfig((c) => ({ ...c, cluster: { ...c.cluster, bootstrapToken: 'zzzzzz.0123456789zzzzzz' } }));
    const entry = ok(await rig.plan()).plan.entries().find((e) => e.id === 'kube1/kubelet.config')!;
    expect(entry.reasons).toEqual(['input auth changed (sensitive)']);
    rig.runner.reset();
    ok(await rig.apply());
    expect(readFileSync(path.join(rig.root, 'var/lib/kubelet/bootstrap-kubeconfig'), 'utf8')).toContain('token: zzzzzz.0123456789zzzzzz');
    const state = readFileSync(path.join(rig.dir, 'state/state.jsonl'), 'utf8');
    expect(state).not.toContain('0123456789');
  });

  it("keeps a registry's credentials in containerd.extra and a download URL's out of the plan and the state, and applies a new one", async () => {
    const configs = (password: string) => ({ plugins: { 'io.containerd.grpc.v1.cri': { registry: { configs: { 'reg.example.com': { auth: { username: 'robot', password } } } } } } });
    const kubelet = (token: string) => ({ source: `https://robot:url-pass-${token}@dl.example.com/kubelet?token=url-token-${token}` });
    rig = makeRig(
      { containerd: { extra: configs('registry-pass-1') }, binaries: { kubelet: kubelet('1') } },
      { answer: (argv) => (argv[0] === 'curl' ? (writeFileSync(argv[argv.indexOf('--output') + 1]!, '#!/bin/sh\n'), {}) : undefined) },
    );
    const secrets = (n: string) => [`registry-pass-${n}`, `url-pass-${n}`, `url-token-${n}`];
    const state = () => readFileSync(path.join(rig.dir, 'state/state.jsonl'), 'utf8');
    ok(await rig.apply());
    for (const secret of secrets('1')) expect(state()).not.toContain(secret);

    rig.writeConfig((c) => ({ ...c, containerd: { extra: configs('registry-pass-2') }, binaries: { kubelet: kubelet('2') } }));
    const plan = ok(await rig.plan());
    const reasons = (id: string) => plan.plan.entries().find((e) => e.id === id)!.reasons;
    expect(reasons('kube1/containerd.config')).toEqual(['input extraSecrets changed (sensitive)']);
    expect(reasons('kube1/provision.kubelet')).toEqual(['input sourceUrl changed (sensitive)']);
    ok(await rig.apply());
    const toml = readFileSync(path.join(rig.root, 'var/lib/nodegraph/containers/kube1/rootfs/etc/containerd/config.toml'), 'utf8');
    expect(toml).toContain('password = "registry-pass-2"');
    const seen = JSON.stringify(rig.events);
    for (const secret of [...secrets('1'), ...secrets('2')]) {
      expect(state()).not.toContain(secret);
      expect(seen).not.toContain(secret);
    }
  });

  it('accepts the example configuration', async () => {
    const { validateNodeConfig } = await import('../../../graphs/node-config.ts');
    const example = JSON.parse(readFileSync(new URL('../../../graphs/node.example.json', import.meta.url), 'utf8'));
    const checked = validateNodeConfig(example);
    expect(checked.ok ? [] : checked.error).toEqual([]);
  });

  it('says what a wrong server, DNS address or prepare list should be', async () => {
    const { validateNodeConfig } = await import('../../../graphs/node-config.ts');
    const example = JSON.parse(readFileSync(new URL('../../../graphs/node.example.json', import.meta.url), 'utf8'));
    const errors = (change: Record<string, unknown>): string[] => {
      const checked = validateNodeConfig({ ...example, ...change });
      return checked.ok ? [] : checked.error;
    };
    expect(errors({ cluster: { ...example.cluster, server: 'http://10.0.0.1:6443' } })).toEqual(['cluster.server: an https:// URL (the API server)']);
    expect(errors({ clusterDNS: ['10.0.0.300'] })).toEqual(['clusterDNS.0: an IPv4 or IPv6 address']);
    expect(errors({ clusterDNS: [] })).toEqual(['clusterDNS: at least one address']);
    expect(errors({ prepare: ['kube2', 'kube2'] })).toEqual(['prepare: a slot named twice']);
  });

  it('says what a cluster credential given inline should be', async () => {
    const { validateNodeConfig } = await import('../../../graphs/node-config.ts');
    const example = JSON.parse(readFileSync(new URL('../../../graphs/node.example.json', import.meta.url), 'utf8'));
    const checked = validateNodeConfig({ ...example, cluster: { server: 'https://10.0.0.1:6443', caData: 'MIIB…', bootstrapToken: '' } });
    expect(checked.ok ? [] : checked.error).toEqual(['cluster.caData: a PEM certificate', 'cluster.bootstrapToken: a bootstrap token: abcdef.0123456789abcdef']);
  });

  it('names the field of a credential file that is missing or not PEM, and changes nothing', async () => {
    rig = makeRig();
    const ca = path.join(rig.dir, 'cluster ca.pem');
    const key = path.join(rig.dir, 'client.key');
    writeFileSync(ca, 'not a certificate\n');
    writeFileSync(key, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    rig.writeConfig((c) => ({ ...c, cluster: { server: 'https://10.0.0.1:6443', caFile: 'cluster ca.pem', clientCertificateFile: 'client.crt', clientKeyFile: 'client.key' } }));
    const result = await rig.apply();
    expect(result.ok).toBe(false);
    const message = !result.ok && 'message' in result.error[0]! ? String(result.error[0].message) : '';
    expect(message.split('\n')).toEqual([
      `Error: the node configuration ${rig.configFile} is not valid:`,
      `  cluster.caFile: ${ca} is not a PEM certificate`,
      `  cluster.clientCertificateFile: ${path.join(rig.dir, 'client.crt')} cannot be read: ENOENT: no such file or directory, open '${path.join(rig.dir, 'client.crt')}'`,
      `  cluster.clientKeyFile: ${key} is not a PEM private key`,
    ]);
    expect(readdirSync(rig.root)).toEqual([]);
    expect(rig.runner.events).toEqual([]);
  });

  it('refuses a path with a newline by its field, as unit files hold one value per line', async () => {
    const { validateNodeConfig } = await import('../../../graphs/node-config.ts');
    const example = JSON.parse(readFileSync(new URL('../../../graphs/node.example.json', import.meta.url), 'utf8'));
    const checked = validateNodeConfig({
      ...example,
      runtime: { runc: '/usr/sbin/runc\nExecStartPost=/bin/true' },
      kubelet: { binary: '/usr/local/bin/kubelet\t' },
      containerd: { certsDir: '/etc/containerd/certs.d\r' },
      layoutDir: '/var/lib/node graph',
    });
    const oneLine = 'a path without a newline or other control character';
    expect(checked.ok ? [] : checked.error).toEqual([`runtime.runc: ${oneLine}`, `containerd.certsDir: ${oneLine}`, `kubelet.binary: ${oneLine}`]);
  });

  it('refuses a bundle.base that is not JSON when the graph loads, naming it, and changes nothing', async () => {
    rig = makeRig();
    const base = path.join(rig.dir, 'base.json');
    writeFileSync(base, '{ "ociVersion": ');
    rig.writeConfig((c) => ({ ...c, bundle: { base: 'base.json' } }));
    const result = await rig.apply();
    expect(result.ok).toBe(false);
    const message = !result.ok && 'message' in result.error[0]! ? String(result.error[0].message) : '';
    expect(message.split('\n')).toEqual([
      `Error: the node configuration ${rig.configFile} is not valid:`,
      `  bundle.base ${base} is not JSON: Unexpected end of JSON input`,
    ]);
    expect(readdirSync(rig.root)).toEqual([]);
  });

  it('refuses a missing image when the graph loads, naming the configuration and its image field, and changes nothing', async () => {
    rig = makeRig();
    ok(await rig.apply());
    const journal = path.join(rig.dir, 'state/state.jsonl');
    const before = readFileSync(journal);
    const image = String(rig.config.image);
    rmSync(image);
    for (const result of [await rig.plan(), await rig.apply()]) {
      expect(!result.ok && result.error.map((f) => f.reason)).toEqual(['nodefile-threw']);
      const message = !result.ok && 'message' in result.error[0]! ? String(result.error[0].message) : '';
      expect(message.split('\n')).toEqual([
        `Error: the node configuration ${rig.configFile} is not valid:`,
        `  image: ${image} cannot be read: ENOENT: no such file or directory, stat '${image}'`,
      ]);
    }
    expect(readFileSync(journal).equals(before)).toBe(true);
  });

  it('destroys a node whose bundle.base is gone: the graph still loads, the plan names the missing input', async () => {
    rig = makeRig();
    const base = path.join(rig.dir, 'base.json');
    writeFileSync(base, JSON.stringify({ ociVersion: '1.0.2' }));
    rig.writeConfig((c) => ({ ...c, bundle: { base: 'base.json' } }));
    ok(await rig.apply());
    rmSync(base);
    const plan = await rig.plan();
    expect(!plan.ok && plan.error[0]).toMatchObject({ reason: 'missing-input', task: 'kube1/bundle', input: 'base', path: base });
    const destroyed = ok(await rig.destroy());
    expect(destroyed.failed).toEqual([]);
    expect(rig.runner.containers.size).toBe(0);
  });

  it('reads a configuration file an editor saved with a byte-order mark', async () => {
    rig = makeRig();
    writeFileSync(rig.configFile, `\uFEFF${JSON.stringify(rig.config)}`);
    expect(ok(await rig.apply()).failed).toEqual([]);
  });

  it('says which configuration fields are wrong', async () => {
    rig = makeRig();
    writeFileSync(rig.configFile, JSON.stringify({ ...rig.config, slot: 'kube3', clusterDNS: [], nodeName: 'Bad_Name' }));
    const result = await rig.plan();
    expect(result.ok).toBe(false);
    const text = JSON.stringify(!result.ok && result.error);
    expect(text).toContain('is not valid');
    for (const field of ['nodeName:', 'clusterDNS:', 'slot:']) expect(text).toContain(field);
  });
});
