// How a wrong node setting is reported (src/node/settings.ts): one line per problem, naming where it is
// and what it should be, in the configuration's own words.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateNodeConfig } from '../../../graphs/node-config.ts';

const example = JSON.parse(readFileSync(new URL('../../../graphs/node.example.json', import.meta.url), 'utf8'));
const errors = (change: Record<string, unknown>): string[] => {
  const checked = validateNodeConfig({ ...example, ...change });
  return checked.ok ? [] : checked.error;
};

describe('a wrong node setting', () => {
  it("is named by a key of its own, quoted when it holds dots, with the key's own rule", () => {
    expect(errors({ labels: { 'Bad Key': 'x', 'node.example.com/pool': 'bad value!' } })).toEqual([
      'labels["Bad Key"]: a label key: [prefix/]name, the name at most 63 letters, digits and -_., the prefix a DNS subdomain',
      'labels["node.example.com/pool"]: a label value: at most 63 letters, digits and -_., starting and ending with a letter or digit',
    ]);
    expect(errors({ registryMirrors: { '..': ['https://mirror.example.com'] } })).toEqual([
      'registryMirrors[".."]: a registry host, optionally with :port, or _default',
    ]);
  });

  it('is a label kubelet would refuse to start with: one too long, or one in kubernetes.io it may not set itself', () => {
    const mayNot =
      'a label kubelet may set on its node: in kubernetes.io or k8s.io only [*.]node.kubernetes.io/…, [*.]kubelet.kubernetes.io/… and the well-known topology, os, arch and instance-type labels';
    expect(errors({ labels: { 'node-role.kubernetes.io/worker': '', 'k8s.io/x': 'y', pool: 'v'.repeat(64) } })).toEqual([
      `labels["node-role.kubernetes.io/worker"]: ${mayNot}`,
      `labels["k8s.io/x"]: ${mayNot}`,
      'labels.pool: a label value: at most 63 letters, digits and -_., starting and ending with a letter or digit',
    ]);
    const allowed = { 'node.kubernetes.io/pool': 'a', 'x.kubelet.kubernetes.io/y': 'b', 'topology.kubernetes.io/zone': 'z', 'example.com/a': 'v'.repeat(63) };
    expect(errors({ labels: allowed })).toEqual([]);
    // A taint is registered by kubelet, under any key.
    expect(errors({ taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] })).toEqual([]);
  });

  it('is a node name the API server or the container would refuse', () => {
    const dns = 'a DNS-1123 node name: lower-case labels of letters, digits and -, joined by dots';
    expect(errors({ nodeName: 'node..a' })).toEqual([`nodeName: ${dns}`]);
    expect(errors({ nodeName: 'node.-a' })).toEqual([`nodeName: ${dns}`]);
    expect(errors({ nodeName: `n${'.a'.repeat(32)}` })).toEqual(["nodeName: at most 64 characters: the node name is also the container's hostname"]);
    expect(errors({ nodeName: 'ip-172-31-22-10.ap-southeast-2.compute.internal' })).toEqual([]);
  });

  it('is a misspelt field of an extra mount or a hook, which would be dropped without a word', () => {
    const mount = { destination: '/data', type: 'bind', source: '/srv/data', option: ['rbind', 'ro'] };
    expect(errors({ bundle: { extraMounts: [mount] } })).toEqual(['bundle.extraMounts.0: Unrecognized key: "option"']);
    expect(errors({ bundle: { hooks: { prestrat: [{ path: '/bin/true' }] } } })).toEqual(['bundle.hooks: Unrecognized key: "prestrat"']);
    expect(errors({ bundle: { hooks: { prestart: [{ path: '/bin/true', arg: ['x'] }] } } })).toEqual(['bundle.hooks.prestart.0: Unrecognized key: "arg"']);
    expect(errors({ bundle: { extraMounts: [{ destination: '/data', type: 'bind', source: '/srv/data', options: ['rbind', 'ro'] }], hooks: { poststop: [{ path: '/bin/true', args: ['true'], timeout: 5 }] } } })).toEqual([]);
  });

  it("is a layout folder that holds what is not a slot's: destroy removes it whole", () => {
    const advice = 'and destroy removes the layout folder whole; give the slots a folder of their own (/var/lib/nodegraph/containers)';
    expect(errors({ layoutDir: '/var/lib/nodegraph' })).toEqual([`layoutDir: /var/lib/nodegraph holds /var/lib/nodegraph/host-folders, ${advice}`]);
    expect(errors({ layoutDir: '/var/lib/nodegraph/images' })).toEqual([`layoutDir: /var/lib/nodegraph/images is /var/lib/nodegraph/images, ${advice}`]);
    expect(errors({ layoutDir: '/' })).toEqual([`layoutDir: / holds /var/lib/nodegraph/host-folders, ${advice}`]);
    expect(errors({ layoutDir: '/var/lib/nodegraph/containers' })).toEqual([]);
    expect(errors({ layoutDir: '/srv/nodegraph-slots' })).toEqual([]);
  });

  it("is a certs.d that would hide the node's own configuration: the host's is mounted over it", () => {
    const advice = "which the host's certsDir mounted over it would hide in the node; give it a folder of its own (/etc/containerd/certs.d)";
    expect(errors({ containerd: { certsDir: '/etc/containerd' } })).toEqual([`containerd.certsDir: /etc/containerd holds /etc/containerd/config.toml, ${advice}`]);
    expect(errors({ containerd: { certsDir: '/' } })).toEqual([`containerd.certsDir: / holds /sbin/init, ${advice}`]);
    expect(errors({ containerd: { certsDir: '/etc/containerd/registries' } })).toEqual([]);
  });

  it('is a client certificate beside a bootstrap token, which would be ignored', () => {
    const cluster = { server: 'https://10.0.0.1:6443', caFile: '/etc/nodegraph/ca.crt' };
    const either = 'cluster: give either bootstrapToken, or clientCertificateFile and clientKeyFile';
    expect(errors({ cluster: { ...cluster, bootstrapToken: 'abcdef.0123456789abcdef', clientCertificateFile: '/etc/nodegraph/kubelet.crt' } })).toEqual([either]);
    expect(errors({ cluster: { ...cluster, clientCertificateFile: '/etc/nodegraph/kubelet.crt' } })).toEqual([either]);
    expect(errors({ cluster: { ...cluster, clientCertificateFile: '/etc/nodegraph/kubelet.crt', clientKeyFile: '/etc/nodegraph/kubelet.key' } })).toEqual([]);
  });

  it('is a cgroup driver kubelet and containerd do not share', () => {
    const both = 'kubelet and containerd must use one cgroup driver, or pods do not start';
    expect(errors({ kubelet: { cgroupDriver: 'cgroupfs' } })).toEqual([`kubelet.cgroupDriver: cgroupfs, but containerd.systemdCgroup is true: ${both}`]);
    expect(errors({ containerd: { systemdCgroup: false } })).toEqual([`kubelet.cgroupDriver: systemd, but containerd.systemdCgroup is false: ${both}`]);
    expect(errors({ kubelet: { cgroupDriver: 'cgroupfs' }, containerd: { systemdCgroup: false } })).toEqual([]);
  });

  it('is every problem the checks after the schema find, each by its field, not only the first', () => {
    expect(errors({ slot: 'kube1', prepare: ['kube1'], layoutDir: '/', kubelet: { cgroupDriver: 'cgroupfs' }, containerd: { certsDir: '/etc/containerd' } })).toEqual([
      'prepare: kube1 is the running slot',
      'layoutDir: / holds /var/lib/nodegraph/host-folders, and destroy removes the layout folder whole; give the slots a folder of their own (/var/lib/nodegraph/containers)',
      'kubelet.cgroupDriver: cgroupfs, but containerd.systemdCgroup is true: kubelet and containerd must use one cgroup driver, or pods do not start',
      "containerd.certsDir: /etc/containerd holds /etc/containerd/config.toml, which the host's certsDir mounted over it would hide in the node; give it a folder of its own (/etc/containerd/certs.d)",
    ]);
  });

  it('is a taint repeated by key and effect, which the API server refuses', () => {
    const taint = { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' };
    expect(errors({ taints: [taint, { ...taint, value: 'cpu' }] })).toEqual(['taints: a key and effect named twice (the API server refuses the node)']);
    expect(errors({ taints: [taint, { ...taint, effect: 'NoExecute' }] })).toEqual([]);
  });

  it('is described by the form it was written in, when a setting takes one of several', () => {
    expect(errors({ registryMirrors: { 'docker.io': [{ url: 'https://mirror.example.com', skipVerify: 'yes' }] } })).toEqual([
      'registryMirrors["docker.io"].0.skipVerify: Invalid input: expected boolean, received string',
    ]);
    expect(errors({ cni: { bridge: 'a-bridge-name-too-long' } })).toEqual(['cni.bridge: an interface name (at most 15 characters)']);
    expect(errors({ cni: true })).toEqual(["cni: false, or the pod network's settings (an object)"]);
  });
});
