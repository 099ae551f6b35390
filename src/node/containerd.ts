// containerd's config.toml (schema version 2 for containerd 1.x, 3 for 2.x)
// and its registry hosts under certs.d/<registry>/hosts.toml. Settings are
// validated with zod; the document is built as a plain table and written by
// toml.ts, so what is rendered parses back to the same table.

import { z } from 'zod';
import { err, ok, type Result } from '../util/result.ts';
import { toToml, type TomlTable } from './toml.ts';
import { absolutePath as absolute, deepMerge, issueLines } from './settings.ts';

/**
 * Is containerd answering? `ctr version` waits 10 s by default on a socket
 * that accepts connections nobody answers (a wedged containerd); one second
 * is ample for one that is served.
 */
export const CTR_VERSION: readonly string[] = ['ctr', '--connect-timeout=1s', 'version'];

export const mirrorSchema = z.union([
  z.url({ protocol: /^https?$/ }),
  z.strictObject({
    url: z.url({ protocol: /^https?$/ }),
    capabilities: z.array(z.enum(['pull', 'resolve', 'push'])).min(1).optional(),
    skipVerify: z.boolean().optional(),
    /** A CA file path as the container sees it. */
    ca: absolute.optional(),
    /** The mirror serves the API at its URL's path (no /v2 added). */
    overridePath: z.boolean().optional(),
  }),
]);
export type Mirror = z.infer<typeof mirrorSchema>;

/**
 * Registry host (`docker.io`, `registry.k8s.io`, `myreg:5000` or `_default`) → mirrors, tried in order.
 * The host names a folder in certs.d, so it starts with a letter or digit: `..` would write outside it.
 */
export const registryMirrorsSchema = z.record(
  z.string().regex(/^(_default|[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?)$/, 'a registry host, optionally with :port, or _default'),
  z.array(mirrorSchema).min(1),
);
export type RegistryMirrors = z.infer<typeof registryMirrorsSchema>;

/** TOML has no null: the renderer would drop one in a table and fail on one in an array, during an apply. */
function refuseNull(value: unknown, ctx: z.RefinementCtx, at: (string | number)[] = []): void {
  if (value === null) ctx.addIssue({ code: 'custom', path: at, message: 'a TOML value (TOML has no null)' });
  else if (Array.isArray(value)) value.forEach((v, i) => refuseNull(v, ctx, [...at, i]));
  else if (typeof value === 'object') for (const [k, v] of Object.entries(value)) refuseNull(v, ctx, [...at, k]);
}

export const containerdSettingsSchema = z.strictObject({
  /** 2 for containerd 1.x (Debian bookworm ships 1.6), 3 for containerd 2.x. */
  version: z.union([z.literal(2), z.literal(3)]).default(2),
  sandboxImage: z.string().min(1).default('registry.k8s.io/pause:3.9'),
  systemdCgroup: z.boolean().default(true),
  certsDir: absolute.default('/etc/containerd/certs.d'),
  cniBinDir: absolute.default('/opt/cni/bin'),
  cniConfDir: absolute.default('/etc/cni/net.d'),
  /** Merged over the generated document, table by table (for settings this schema does not name). */
  extra: z.record(z.string(), z.unknown()).superRefine(refuseNull).default({}),
});
export type ContainerdSettings = z.output<typeof containerdSettingsSchema>;
export type ContainerdSettingsInput = z.input<typeof containerdSettingsSchema>;

export function validateContainerdSettings(input: unknown): Result<ContainerdSettings, string[]> {
  const parsed = containerdSettingsSchema.safeParse(input ?? {});
  if (parsed.success) return ok(parsed.data);
  return err(issueLines(parsed.error.issues, ['containerd']));
}

/** What the node adds to containerd's settings: `nvidia`, a runtime handler for GPU pods (RuntimeClass `nvidia`). */
export interface ContainerdExtras {
  readonly nvidia?: boolean;
}

/** The NVIDIA Container Toolkit's runtime, which containerd runs instead of runc for a pod that asks for it. */
export const NVIDIA_RUNTIME_BINARY = '/usr/bin/nvidia-container-runtime';

export function containerdDocument(s: ContainerdSettings, extras: ContainerdExtras = {}): TomlTable {
  const runc = {
    runtime_type: 'io.containerd.runc.v2',
    options: { SystemdCgroup: s.systemdCgroup },
  };
  const nvidia = { runtime_type: 'io.containerd.runc.v2', options: { BinaryName: NVIDIA_RUNTIME_BINARY, SystemdCgroup: s.systemdCgroup } };
  const runtimes = extras.nvidia === true ? { runc, nvidia } : { runc };
  const doc: TomlTable =
    s.version === 2
      ? {
          version: 2,
          plugins: {
            'io.containerd.grpc.v1.cri': {
              sandbox_image: s.sandboxImage,
              containerd: { default_runtime_name: 'runc', runtimes },
              cni: { bin_dir: s.cniBinDir, conf_dir: s.cniConfDir },
              registry: { config_path: s.certsDir },
            },
          },
        }
      : {
          version: 3,
          plugins: {
            'io.containerd.cri.v1.images': {
              pinned_images: { sandbox: s.sandboxImage },
              registry: { config_path: s.certsDir },
            },
            'io.containerd.cri.v1.runtime': {
              containerd: { default_runtime_name: 'runc', runtimes },
              cni: { bin_dir: s.cniBinDir, conf_dir: s.cniConfDir },
            },
          },
        };
  return deepMerge(doc, s.extra);
}

export const renderContainerdConfig = (s: ContainerdSettings, extras: ContainerdExtras = {}): string =>
  `# Written by nodegraph; edits are replaced on the next apply.\n${toToml(containerdDocument(s, extras))}`;

/** Just enough of a parsed config.toml to check what nodegraph relies on; the rest is kept. */
export const containerdConfigSchema = z.looseObject({
  version: z.union([z.literal(2), z.literal(3)]),
  plugins: z.record(z.string(), z.looseObject({})),
});

/** The server a registry host stands for, as hosts.toml names it. */
export function registryServer(registry: string): string | undefined {
  if (registry === '_default') return undefined;
  if (registry === 'docker.io') return 'https://registry-1.docker.io';
  return `https://${registry}`;
}

export function hostsDocument(registry: string, mirrors: readonly Mirror[]): TomlTable {
  const doc: TomlTable = {};
  const server = registryServer(registry);
  if (server !== undefined) doc['server'] = server;
  const hosts: Record<string, TomlTable> = {};
  for (const mirror of mirrors) {
    const m = typeof mirror === 'string' ? { url: mirror } : mirror;
    const entry: TomlTable = { capabilities: m.capabilities ?? ['pull', 'resolve'] };
    if (m.skipVerify !== undefined) entry['skip_verify'] = m.skipVerify;
    if (m.ca !== undefined) entry['ca'] = m.ca;
    if (m.overridePath !== undefined) entry['override_path'] = m.overridePath;
    hosts[m.url] = entry;
  }
  doc['host'] = hosts;
  return doc;
}

/** Every hosts.toml for the mirrors: certs.d-relative path → content. */
export function renderHostsFiles(mirrors: RegistryMirrors): Map<string, string> {
  const files = new Map<string, string>();
  for (const registry of Object.keys(mirrors).sort()) {
    files.set(
      `${registry}/hosts.toml`,
      `# Written by nodegraph; edits are replaced on the next apply.\n${toToml(hostsDocument(registry, mirrors[registry]!))}`,
    );
  }
  return files;
}
