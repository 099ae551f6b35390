// The container node's configuration file: a JSON document validated with
// zod. Validation is pure (`validateNodeConfig`); `readNodeConfig` reads the
// file and resolves its relative paths against the file's folder.

import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { containerdSettingsSchema, registryMirrorsSchema } from '../src/node/containerd.ts';
import { cniSettingsSchema } from '../src/node/cni.ts';
import { bootstrapTokenSchema, nodeLabelsSchema, nodeNameSchema, pemCertificateSchema, pemKeySchema, taintsSchema, type KubeletSettings } from '../src/node/kubelet.ts';
import { binarySourceSchema } from '../src/node/provision.ts';
import { absolutePath as absolute, issueLines } from '../src/node/settings.ts';
import { hookPhases, hookSchema, mountSchema, sharedPaths, type Mount } from '../src/node/bundle.ts';
import { FOLDERS_PATH } from '../src/node/folders.ts';
import { HELPER_PATH } from '../src/node/helper.ts';
import { MODULES_LOAD_PATH } from '../src/node/kernel-modules.ts';
import { readBase } from '../src/node/slot-bundle.ts';

export const SLOTS = ['kube1', 'kube2'] as const;
export type Slot = (typeof SLOTS)[number];

const seconds = z.number().positive();

/** The configuration's own mounts and hooks are strict: a misspelt field (`option`) would be dropped without a word. */
const configMount = z.strictObject(mountSchema.shape);
const configHook = z.strictObject(hookSchema.shape);
const configHooks = z.strictObject(Object.fromEntries(hookPhases.map((p) => [p, z.array(configHook).optional()])) as Record<(typeof hookPhases)[number], z.ZodOptional<z.ZodArray<typeof configHook>>>);

/** A binary whose version defaults to the Kubernetes version. */
const k8sBinarySchema = binarySourceSchema.extend({ version: z.string().min(1).optional() });

export const nodeConfigSchema = z.strictObject({
  nodeName: nodeNameSchema,
  cluster: z
    .strictObject({
      server: z.url({ protocol: /^https$/, error: 'an https:// URL (the API server)' }),
      /** The cluster CA: a PEM file, or the PEM text itself. */
      caFile: z.string().min(1).optional(),
      caData: pemCertificateSchema.optional(),
      /** TLS bootstrap token (`abcdef.0123456789abcdef`), or a client certificate and key. */
      bootstrapToken: bootstrapTokenSchema.optional(),
      clientCertificateFile: z.string().min(1).optional(),
      clientKeyFile: z.string().min(1).optional(),
    })
    .refine((c) => (c.caFile === undefined) !== (c.caData === undefined), 'give exactly one of caFile and caData')
    .refine(
      // A client file beside a token would be ignored without a word.
      (c) =>
        c.bootstrapToken !== undefined
          ? c.clientCertificateFile === undefined && c.clientKeyFile === undefined
          : c.clientCertificateFile !== undefined && c.clientKeyFile !== undefined,
      'give either bootstrapToken, or clientCertificateFile and clientKeyFile',
    ),
  labels: nodeLabelsSchema.default({}),
  taints: taintsSchema.default([]),
  clusterDNS: z.array(z.union([z.ipv4(), z.ipv6()], { error: 'an IPv4 or IPv6 address' })).min(1, 'at least one address'),
  clusterDomain: z.string().default('cluster.local'),
  registryMirrors: registryMirrorsSchema.default({}),
  kubernetesVersion: z.string().regex(/^v[0-9]+\.[0-9]+\.[0-9]+([-+].*)?$/, 'a version like v1.30.2'),
  /** The OS image: a tar archive (gzip, xz or zstd) or an OCI image layout directory. */
  image: z.string().min(1),
  /** The slot that runs. */
  slot: z.enum(SLOTS),
  /** runc's id of a slot's container (and its unit's name): `{slot}` is the slot, so each slot has its own. */
  containerId: z
    .string()
    .regex(/^[A-Za-z0-9_.-]*\{slot\}[A-Za-z0-9_.-]*$/, 'letters, digits and _.- around {slot}, which each slot fills in (node-a-{slot})')
    .default('{slot}'),
  /** Other slots to prepare beside it (unpacked, bundled, not started): the first half of an upgrade. */
  prepare: z
    .array(z.enum(SLOTS))
    .refine((slots) => new Set(slots).size === slots.length, 'a slot named twice')
    .default([]),
  layoutDir: absolute.default('/var/lib/nodegraph/containers'),
  /** Every host path goes below this folder: '/' on a real node, a temporary folder in tests. */
  root: absolute.default('/'),
  runtime: z
    .strictObject({
      /** The runc binary: absolute, since the supervising unit names it too. */
      runc: absolute.default('/usr/sbin/runc'),
      /** runc's state directory; its default (/run/runc, below the root prefix) when absent. */
      stateRoot: absolute.optional(),
      /** Install runc from here when it is not the wanted version. */
      install: binarySourceSchema.optional(),
    })
    .default({ runc: '/usr/sbin/runc' }),
  /** Who keeps the container running: a systemd unit, `runc run --detach`, or whichever the host allows. */
  supervisor: z.enum(['auto', 'systemd', 'runc']).default('auto'),
  /** Share the host's network namespace (a real node). False gives the container its own. */
  hostNetwork: z.boolean().default(true),
  /** Make / shared (rshared) inside the node once it boots, as kubelet's mount propagation needs. */
  sharedRoot: z.boolean().default(true),
  containerd: containerdSettingsSchema.default({
    version: 2,
    sandboxImage: 'registry.k8s.io/pause:3.9',
    systemdCgroup: true,
    certsDir: '/etc/containerd/certs.d',
    cniBinDir: '/opt/cni/bin',
    cniConfDir: '/etc/cni/net.d',
    extra: {},
  }),
  kubelet: z
    .strictObject({
      cgroupDriver: z.enum(['systemd', 'cgroupfs']).default('systemd'),
      binary: absolute.default('/usr/local/bin/kubelet'),
      extra: z.record(z.string(), z.unknown()).default({}),
    })
    .default({ cgroupDriver: 'systemd', binary: '/usr/local/bin/kubelet', extra: {} }),
  /** The pod network's CNI configuration; false when a network add-on writes its own. */
  cni: z.union([z.literal(false), cniSettingsSchema], { error: "false, or the pod network's settings (an object)" }).default({
    name: 'nodegraph',
    bridge: 'cni0',
    podCIDRs: ['10.88.0.0/16'],
    cniVersion: '1.0.0',
    extraPlugins: [],
  }),
  binaries: z
    .strictObject({
      kubelet: k8sBinarySchema.optional(),
      crictl: binarySourceSchema.optional(),
      cniPlugins: binarySourceSchema.optional(),
    })
    .default({}),
  bundle: z
    .strictObject({
      /** A config.json to start from; what it holds that the node does not set is kept (hooks too). */
      base: z.string().optional(),
      hooks: configHooks.optional(),
      extraMounts: z.array(configMount).default([]),
      annotations: z.record(z.string(), z.string()).default({}),
      cgroupsPath: z.string().optional(),
    })
    .default({ extraMounts: [], annotations: {} }),
  /** A host folder of staged image archives (`*.tar`), bind-mounted at the same path and imported into containerd. */
  imageArchiveDir: absolute.optional(),
  /** Remove from containerd the images of an archive taken out of imageArchiveDir (left there otherwise). */
  imageArchivePrune: z.boolean().default(false),
  /** Kernel modules the host must have loaded: listed in /etc/modules-load.d/nodegraph.conf and loaded when missing. */
  kernelModules: z.array(z.string().regex(/^[A-Za-z0-9_-]+$/, 'a kernel module name')).default(['overlay', 'br_netfilter']),
  /** NVIDIA devices and driver libraries: granted when the host has them ('auto'), or never. */
  gpu: z.enum(['auto', 'off']).default('auto'),
  timeouts: z
    .strictObject({
      systemd: seconds.default(120),
      service: seconds.default(60),
      stop: seconds.default(60),
      interval: seconds.default(1),
      /** After a change, how long the node must stay healthy (systemd running, containerd answering, kubelet active) before it is kept. */
      healthy: z.number().min(0, 'seconds, at least 0').default(10),
    })
    .default({ systemd: 120, service: 60, stop: 60, interval: 1, healthy: 10 }),
});

export type NodeConfig = z.output<typeof nodeConfigSchema>;
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;

/** The configuration, or every problem with it, one line each. */
export function validateNodeConfig(input: unknown): { ok: true; value: NodeConfig } | { ok: false; error: string[] } {
  const parsed = nodeConfigSchema.safeParse(input);
  if (!parsed.success) return { ok: false, error: issueLines(parsed.error.issues) };
  const config = parsed.data;
  const problems: string[] = [];
  if (config.prepare.includes(config.slot)) problems.push(`prepare: ${config.slot} is the running slot`);
  const held = ownPaths(config).find(within(config.layoutDir));
  if (held !== undefined) {
    const what = `${config.layoutDir} ${held === config.layoutDir ? 'is' : 'holds'} ${held}`;
    problems.push(`layoutDir: ${what}, and destroy removes the layout folder whole; give the slots a folder of their own (/var/lib/nodegraph/containers)`);
  }
  if ((config.kubelet.cgroupDriver === 'systemd') !== config.containerd.systemdCgroup) {
    const driver = `${config.kubelet.cgroupDriver}, but containerd.systemdCgroup is ${config.containerd.systemdCgroup}`;
    problems.push(`kubelet.cgroupDriver: ${driver}: kubelet and containerd must use one cgroup driver, or pods do not start`);
  }
  const hidden = rootfsPaths(config).find(within(config.containerd.certsDir));
  if (hidden !== undefined) {
    const what = `${config.containerd.certsDir} ${hidden === config.containerd.certsDir ? 'is' : 'holds'} ${hidden}`;
    problems.push(`containerd.certsDir: ${what}, which the host's certsDir mounted over it would hide in the node; give it a folder of its own (/etc/containerd/certs.d)`);
  }
  if (problems.length > 0) return { ok: false, error: problems };
  return { ok: true, value: config };
}

/** Is a path `dir` itself or below it? */
const within = (dir: string) => (p: string): boolean => p === path.posix.resolve(dir) || p.startsWith(`${path.posix.resolve(dir).replace(/\/$/, '')}/`);

/** What the node writes into a slot's rootfs, or runs from it: a shared folder mounted over one would hide it. */
function rootfsPaths(c: NodeConfig): string[] {
  const files = ['/sbin/init', '/etc/containerd/config.toml', '/etc/systemd/system/kubelet.service.d', c.containerd.cniConfDir, c.kubelet.binary];
  return files.map((p) => path.posix.resolve(p));
}

/** Where the node keeps what is not a slot's: its ledger and helper, the shared folders, host files. */
function ownPaths(c: NodeConfig): string[] {
  const files = [FOLDERS_PATH, HELPER_PATH, MODULES_LOAD_PATH, '/etc/systemd/system', ...sharedPaths(c.containerd.certsDir)];
  return [...files, ...(c.imageArchiveDir === undefined ? [] : [c.imageArchiveDir])].map((p) => path.posix.resolve(p));
}

/** The error a configuration that fails a check throws: the file, then each problem on a line of its own. */
const invalidConfig = (file: string, problems: readonly string[]): Error => new Error(`the node configuration ${file} is not valid:\n  ${problems.join('\n  ')}`);

/** The id runc knows a slot's container by. */
export const containerIdOf = (c: Pick<NodeConfig, 'containerId'>, slot: Slot): string => c.containerId.replace('{slot}', slot);

export const CONFIG_ENV = 'NODEGRAPH_NODE_CONFIG';

/** Reads, validates and resolves a node configuration; throws with every problem in the message. */
export function readNodeConfig(file: string): NodeConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`cannot read the node configuration ${file}: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    // A byte-order mark (as some editors write) is not JSON's, and says nothing here.
    raw = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    throw new Error(`the node configuration ${file} is not JSON: ${(error as Error).message}`);
  }
  const checked = validateNodeConfig(raw);
  if (!checked.ok) throw invalidConfig(file, checked.error);
  const config = resolvePaths(checked.value, path.dirname(path.resolve(file)));
  const problems: string[] = [];
  // Every slot is made from the image: a missing one is the configuration's mistake, named by its field.
  try {
    statSync(config.image);
  } catch (error) {
    problems.push(`image: ${config.image} cannot be read: ${(error as Error).message}`);
  }
  // The bundle task reads it again when it runs; a broken one is refused before anything changes. A
  // missing one is the bundle task's missing input, which leaves destroy and stop free to run.
  try {
    if (config.bundle.base !== undefined && existsSync(config.bundle.base)) readBase(config.bundle.base);
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (problems.length > 0) throw invalidConfig(file, problems);
  return config;
}

const isBind = (m: Mount): boolean => m.type === 'bind' || (m.options ?? []).some((o) => o === 'bind' || o === 'rbind');

/** Relative file names in the configuration are relative to its folder. */
export function resolvePaths(c: NodeConfig, dir: string): NodeConfig {
  const at = (p: string): string => (/^https?:\/\//.test(p) ? p : path.resolve(dir, p));
  const source = <T extends { source: string }>(s: T | undefined): T | undefined => (s === undefined ? undefined : { ...s, source: at(s.source) });
  return {
    ...c,
    image: at(c.image),
    cluster: {
      ...c.cluster,
      ...(c.cluster.caFile === undefined ? {} : { caFile: at(c.cluster.caFile) }),
      ...(c.cluster.clientCertificateFile === undefined ? {} : { clientCertificateFile: at(c.cluster.clientCertificateFile) }),
      ...(c.cluster.clientKeyFile === undefined ? {} : { clientKeyFile: at(c.cluster.clientKeyFile) }),
    },
    runtime: { ...c.runtime, ...(c.runtime.install === undefined ? {} : { install: source(c.runtime.install)! }) },
    binaries: {
      ...(c.binaries.kubelet === undefined ? {} : { kubelet: source(c.binaries.kubelet)! }),
      ...(c.binaries.crictl === undefined ? {} : { crictl: source(c.binaries.crictl)! }),
      ...(c.binaries.cniPlugins === undefined ? {} : { cniPlugins: source(c.binaries.cniPlugins)! }),
    },
    bundle: {
      ...c.bundle,
      ...(c.bundle.base === undefined ? {} : { base: at(c.bundle.base) }),
      // runc would take a relative bind source from the bundle's folder, which the operator does not write in.
      extraMounts: c.bundle.extraMounts.map((m) => (isBind(m) && m.source !== undefined ? { ...m, source: path.resolve(dir, m.source) } : m)),
    },
  };
}

/**
 * kubelet's settings from the configuration, with the PEM files it names read and checked when the graph
 * loads: a missing or wrong file is named by its field, before anything on the node changes.
 */
export function kubeletSettingsOf(c: NodeConfig, configFile: string): KubeletSettings {
  const problems: string[] = [];
  const read = (field: string, file: string, pem: z.ZodString): string => {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      problems.push(`cluster.${field}: ${file} cannot be read: ${(error as Error).message}`);
      return text;
    }
    const checked = pem.safeParse(text);
    if (!checked.success) problems.push(`cluster.${field}: ${file} is not ${checked.error.issues[0]!.message}`);
    return text;
  };
  const { cluster } = c;
  const caData = cluster.caData ?? read('caFile', cluster.caFile!, pemCertificateSchema);
  const auth =
    cluster.bootstrapToken !== undefined
      ? { bootstrapToken: cluster.bootstrapToken }
      : {
          clientCertificate: read('clientCertificateFile', cluster.clientCertificateFile!, pemCertificateSchema),
          clientKey: read('clientKeyFile', cluster.clientKeyFile!, pemKeySchema),
        };
  if (problems.length > 0) throw invalidConfig(configFile, problems);
  return {
    nodeName: c.nodeName,
    server: cluster.server,
    caData,
    auth,
    clusterDNS: c.clusterDNS,
    clusterDomain: c.clusterDomain,
    labels: c.labels,
    taints: c.taints,
    cgroupDriver: c.kubelet.cgroupDriver,
    containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
    binary: c.kubelet.binary,
    dir: '/var/lib/kubelet',
    extra: c.kubelet.extra,
  };
}
