// The OCI bundle's config.json: the runtime spec for a node container that
// runs systemd as PID 1. The zod schema names only the fields this node sets
// or reads; every object is loose, so a base config's unknown fields (and its
// hooks) come through a render intact.

import { z } from 'zod';
import { err, ok, type Result } from '../util/result.ts';

const int = z.number().int();

export const hookSchema = z.looseObject({
  path: z.string().regex(/^\//, 'a hook path is absolute'),
  args: z.array(z.string()).optional(),
  env: z.array(z.string()).optional(),
  timeout: int.positive().optional(),
});
export type Hook = z.infer<typeof hookSchema>;

export const hookPhases = ['prestart', 'createRuntime', 'createContainer', 'startContainer', 'poststart', 'poststop'] as const;
export type HookPhase = (typeof hookPhases)[number];

export const hooksSchema = z.looseObject(
  Object.fromEntries(hookPhases.map((p) => [p, z.array(hookSchema).optional()])) as Record<HookPhase, z.ZodOptional<z.ZodArray<typeof hookSchema>>>,
);
export type Hooks = z.infer<typeof hooksSchema>;

export const mountSchema = z.looseObject({
  destination: z.string().regex(/^\//, 'a mount destination is absolute'),
  type: z.string().optional(),
  source: z.string().optional(),
  options: z.array(z.string()).optional(),
});
export type Mount = z.infer<typeof mountSchema>;

export const namespaceSchema = z.looseObject({
  type: z.enum(['pid', 'network', 'mount', 'ipc', 'uts', 'user', 'cgroup', 'time']),
  path: z.string().optional(),
});

type NamespaceType = z.infer<typeof namespaceSchema>['type'];

export const deviceSchema = z.looseObject({
  path: z.string().regex(/^\/dev\//, 'a device path is under /dev'),
  type: z.enum(['c', 'b', 'u', 'p']),
  major: int.nonnegative(),
  minor: int.nonnegative(),
  fileMode: int.optional(),
  uid: int.optional(),
  gid: int.optional(),
});
export type Device = z.infer<typeof deviceSchema>;

export const deviceRuleSchema = z.looseObject({
  allow: z.boolean(),
  type: z.enum(['a', 'c', 'b']).optional(),
  major: int.nullable().optional(),
  minor: int.nullable().optional(),
  access: z.string().regex(/^[rwm]*$/).optional(),
});

export const ociSpecSchema = z.looseObject({
  ociVersion: z.string(),
  process: z
    .looseObject({
      terminal: z.boolean().optional(),
      user: z.looseObject({ uid: int, gid: int }),
      args: z.array(z.string()).min(1),
      env: z.array(z.string()).optional(),
      cwd: z.string(),
      capabilities: z.looseObject({}).optional(),
      rlimits: z.array(z.looseObject({ type: z.string(), hard: int, soft: int })).optional(),
      noNewPrivileges: z.boolean().optional(),
    })
    .optional(),
  root: z.looseObject({ path: z.string(), readonly: z.boolean().optional() }).optional(),
  hostname: z.string().optional(),
  mounts: z.array(mountSchema).optional(),
  hooks: hooksSchema.optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  linux: z
    .looseObject({
      namespaces: z.array(namespaceSchema).optional(),
      resources: z.looseObject({ devices: z.array(deviceRuleSchema).optional() }).optional(),
      devices: z.array(deviceSchema).optional(),
      cgroupsPath: z.string().optional(),
      maskedPaths: z.array(z.string()).optional(),
      readonlyPaths: z.array(z.string()).optional(),
    })
    .optional(),
});
export type OciSpec = z.infer<typeof ociSpecSchema>;

export function validateOciSpec(spec: unknown): Result<OciSpec, string[]> {
  const parsed = ociSpecSchema.safeParse(spec);
  if (parsed.success) return ok(parsed.data);
  return err(parsed.error.issues.map((i) => `${i.path.join('.') || '(config)'}: ${i.message}`));
}

/** Every capability up to Linux 5.9, in kernel order (the index is the bit). */
export const ALL_CAPABILITIES = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID',
  'CAP_SETUID', 'CAP_SETPCAP', 'CAP_LINUX_IMMUTABLE', 'CAP_NET_BIND_SERVICE', 'CAP_NET_BROADCAST', 'CAP_NET_ADMIN',
  'CAP_NET_RAW', 'CAP_IPC_LOCK', 'CAP_IPC_OWNER', 'CAP_SYS_MODULE', 'CAP_SYS_RAWIO', 'CAP_SYS_CHROOT',
  'CAP_SYS_PTRACE', 'CAP_SYS_PACCT', 'CAP_SYS_ADMIN', 'CAP_SYS_BOOT', 'CAP_SYS_NICE', 'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME', 'CAP_SYS_TTY_CONFIG', 'CAP_MKNOD', 'CAP_LEASE', 'CAP_AUDIT_WRITE', 'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP', 'CAP_MAC_OVERRIDE', 'CAP_MAC_ADMIN', 'CAP_SYSLOG', 'CAP_WAKE_ALARM', 'CAP_BLOCK_SUSPEND',
  'CAP_AUDIT_READ', 'CAP_PERFMON', 'CAP_BPF', 'CAP_CHECKPOINT_RESTORE',
] as const;

/**
 * The capabilities the node may have: all of them that are in the bounding
 * set of the process that will run runc (`CapBnd` in /proc/self/status).
 * runc refuses to start a container asking for one outside it (a sandboxed
 * host may lack CAP_SYS_RESOURCE, for example).
 */
export function grantableCapabilities(procStatus: string | undefined): string[] {
  const hex = procStatus === undefined ? undefined : /^CapBnd:\s*([0-9a-f]+)$/m.exec(procStatus)?.[1];
  if (hex === undefined) return [...ALL_CAPABILITIES];
  const mask = BigInt(`0x${hex}`);
  return ALL_CAPABILITIES.filter((_, bit) => (mask >> BigInt(bit)) & 1n);
}

/**
 * The host directories bind-mounted at the same path, so what the host writes there the container reads:
 * certs.d is wherever containerd's settings put it, as the registry hosts are written there on the host.
 */
export const sharedPaths = (certsDir: string): string[] => ['/var/lib/kubelet', '/opt/cni', certsDir, '/run/containerd', '/sys/fs/bpf'];

/** systemd halts on SIGRTMIN+3; SIGTERM would make it re-execute itself. */
export const STOP_SIGNAL = 'SIGRTMIN+3';
export const STOP_SIGNAL_ANNOTATION = 'org.nodegraph.stop-signal';
/** SIGRTMIN+3 as a number (glibc's SIGRTMIN is 34): runc kill does not know the name. */
export const STOP_SIGNAL_NUMBER = 37;

export interface BundleParams {
  readonly hostname: string;
  /** The rootfs, relative to the bundle directory or absolute. */
  readonly rootfs: string;
  /** Host path of each shared directory (`host.path(dest)`), by its path in the container. */
  readonly shared: readonly { readonly destination: string; readonly source: string }[];
  /** Share the host's network namespace (a real node); false gives the container its own. */
  readonly hostNetwork: boolean;
  /** Bounding, effective and permitted set; all by default (see grantableCapabilities). */
  readonly capabilities?: readonly string[];
  readonly devices?: readonly Device[];
  readonly extraMounts?: readonly Mount[];
  readonly env?: readonly string[];
  readonly annotations?: Readonly<Record<string, string>>;
  /** Added after the base's hooks, phase by phase. */
  readonly hooks?: Hooks;
  readonly cgroupsPath?: string;
  /** A config.json to start from: whatever it holds that the node does not set is kept. */
  readonly base?: OciSpec;
}

const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The mounts systemd needs, in the order they must be made (parents first). */
export function systemMounts(): Mount[] {
  return [
    { destination: '/proc', type: 'proc', source: 'proc' },
    { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
    { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'] },
    { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    // Writable: systemd inside manages its own cgroup subtree (cgroup namespace).
    { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', 'rw'] },
    { destination: '/run', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=755'] },
    { destination: '/run/lock', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'noexec', 'mode=1777', 'size=5m'] },
    { destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777'] },
  ];
}

export const sharedMount = (destination: string, source: string): Mount => ({
  destination,
  type: 'bind',
  source,
  options: ['rbind', 'rw'],
});

const MASKED = [
  '/proc/acpi', '/proc/asound', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list',
  '/proc/timer_stats', '/proc/sched_debug', '/sys/firmware', '/proc/scsi',
];
const READONLY = ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'];

/** The node container's config.json. */
export function bundleConfig(p: BundleParams): OciSpec {
  const base: OciSpec = p.base ?? { ociVersion: '1.0.2-dev' };
  const caps = [...(p.capabilities ?? ALL_CAPABILITIES)];
  const env = mergeEnv(base.process?.env ?? [], [PATH_ENV, 'container=oci', ...(p.env ?? [])]);

  const ours = [
    ...systemMounts(),
    ...p.shared.map((s) => sharedMount(s.destination, s.source)),
    ...(p.extraMounts ?? []),
  ];
  const taken = new Set(ours.map((m) => m.destination));
  // A base mount the node does not set is kept, after the node's (its parents come first).
  const mounts = [...ours, ...(base.mounts ?? []).filter((m) => !taken.has(m.destination))];

  const kinds: NamespaceType[] = ['pid', ...(p.hostNetwork ? [] : (['network'] as const)), 'ipc', 'uts', 'mount', 'cgroup'];
  const namespaces = kinds.map((type) => ({ type }));

  const devices = mergeDevices(base.linux?.devices ?? [], p.devices ?? []);
  const rules = [
    { allow: true, access: 'rwm' },
    ...(p.devices ?? []).map((d) => ({ allow: true, type: d.type === 'b' ? ('b' as const) : ('c' as const), major: d.major, minor: d.minor, access: 'rwm' })),
  ];

  const hooks = mergeHooks(base.hooks, p.hooks);
  const annotations = { ...base.annotations, [STOP_SIGNAL_ANNOTATION]: STOP_SIGNAL, ...p.annotations };

  const spec: OciSpec = {
    ...base,
    ociVersion: base.ociVersion,
    process: {
      ...base.process,
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: ['/sbin/init'],
      env,
      cwd: '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: false,
    },
    root: { ...base.root, path: p.rootfs, readonly: false },
    hostname: p.hostname,
    annotations,
    mounts,
    ...(hooks === undefined ? {} : { hooks }),
    linux: {
      ...base.linux,
      resources: { ...base.linux?.resources, devices: rules },
      namespaces,
      ...(devices.length === 0 ? {} : { devices }),
      ...(p.cgroupsPath === undefined ? {} : { cgroupsPath: p.cgroupsPath }),
      maskedPaths: base.linux?.maskedPaths ?? MASKED,
      readonlyPaths: base.linux?.readonlyPaths ?? READONLY,
    },
  };
  return spec;
}

export const renderBundleConfig = (p: BundleParams): string => `${JSON.stringify(bundleConfig(p), null, 2)}\n`;

/** Later entries win for the same variable name; order otherwise kept. */
function mergeEnv(base: readonly string[], ours: readonly string[]): string[] {
  const byName = new Map<string, string>();
  for (const entry of [...base, ...ours]) byName.set(entry.split('=')[0]!, entry);
  return [...byName.values()];
}

function mergeDevices(base: readonly Device[], ours: readonly Device[]): Device[] {
  const byPath = new Map<string, Device>();
  for (const d of [...base, ...ours]) byPath.set(d.path, d);
  return [...byPath.values()];
}

function mergeHooks(base: Hooks | undefined, extra: Hooks | undefined): Hooks | undefined {
  if (extra === undefined) return base;
  const out: Hooks = { ...base };
  for (const phase of hookPhases) {
    const add = extra[phase];
    if (add === undefined || add.length === 0) continue;
    out[phase] = [...(base?.[phase] ?? []), ...add];
  }
  return out;
}
