// A slot's configuration, written into its rootfs and into the folders both
// slots share at the same host paths: containerd's config.toml and registry
// hosts, kubelet's files and unit drop-in, the pod network's conflist. Each
// waits for the slot's takeover, so the slot that runs never sees the other's.

import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskInput, TaskRef } from '../nodefile/types.ts';
import { conflistPath, renderConflist, type CniSettings } from './cni.ts';
import { renderContainerdConfig, renderHostsFiles, type ContainerdSettings, type RegistryMirrors } from './containerd.ts';
import { kubeletDropIn, kubeletSharedFiles, type KubeletSettings } from './kubelet.ts';
import { asJson, renderFile } from './render.ts';
import { fromToml } from './toml.ts';
import { splitSecrets } from './secrets.ts';
import { dropInPath } from './systemd.ts';

/** What every configuration task of a slot is tied to. */
export interface SlotConfigBase {
  readonly slot: string;
  /** The slot's rootfs folder on the host. */
  readonly rootfsDir: string;
  /** The rootfs task: a new rootfs is written again. */
  readonly rootfs: TaskRef;
  /** Tasks that must be done first (the shared folder, the takeover). */
  readonly after: readonly TaskRef[];
}

export interface ContainerdConfigSpec extends SlotConfigBase {
  readonly settings: ContainerdSettings;
  readonly registryMirrors: RegistryMirrors;
  /** The registry hosts' folder, shared by the slots, as a host path. */
  readonly certsDir: string;
  /** Maps a path as the node sees it to the host's (the root prefix). */
  readonly hostPath: (nodePath: string) => string;
  /** Extra inputs (the GPU grants), and whether the NVIDIA runtime is configured, read when the task runs. */
  readonly inputs?: Readonly<Record<string, TaskInput>>;
  readonly nvidia: () => boolean;
}

export function containerdConfigTask(ng: NodefileApi, spec: ContainerdConfigSpec): TaskRef {
  const { certsDir } = spec;
  const hostsFiles = renderHostsFiles(spec.registryMirrors);
  const toml = path.join(spec.rootfsDir, '/etc/containerd/config.toml');
  // A registry's credentials in `extra` are a sensitive input of their own; the rest stays diffable.
  const extra = splitSecrets(spec.settings.extra);
  return ng.task(`${spec.slot}/containerd.config`, {
    description: `containerd's config.toml and registry mirrors for ${spec.slot}`,
    inputs: {
      rootfs: spec.rootfs,
      settings: ng.value(asJson({ ...spec.settings, extra: extra.shown })),
      ...(extra.secret === undefined ? {} : { extraSecrets: ng.value(asJson(extra.secret), { sensitive: true }) }),
      registryMirrors: ng.value(asJson(spec.registryMirrors)),
      ...spec.inputs,
    },
    outputs: [toml, ...[...hostsFiles.keys()].map((rel) => path.join(certsDir, rel))],
    // Shared files stay when a slot goes (host/certs.d removes them once no slot remains); those a change
    // no longer writes (an old certsDir's) go once the task ran.
    removeOutputs: 'dropped',
    after: [...spec.after],
    run: () => {
      // The certsDir the config.toml about to be replaced names: a moved one keeps none of nodegraph's hosts.
      const before = configPathIn(toml);
      renderFile(toml, renderContainerdConfig(spec.settings, { nvidia: spec.nvidia() }));
      for (const [rel, content] of hostsFiles) renderFile(path.join(certsDir, rel), content);
      removeStaleHosts(certsDir, new Set([...hostsFiles.keys()].map((rel) => rel.split('/')[0]!)));
      if (before !== undefined && spec.hostPath(before) !== certsDir) removeStaleHosts(spec.hostPath(before), new Set());
    },
  });
}

export interface KubeletConfigSpec extends SlotConfigBase {
  readonly settings: KubeletSettings;
  /** Maps a path as the node sees it to the host's (the root prefix). */
  readonly hostPath: (nodePath: string) => string;
}

export function kubeletConfigTask(ng: NodefileApi, spec: KubeletConfigSpec): TaskRef {
  const files = kubeletSharedFiles(spec.settings).map((f) => ({ ...f, path: spec.hostPath(f.path) }));
  const dropIn = path.join(spec.rootfsDir, dropInPath('kubelet.service', '10-nodegraph'));
  return ng.task(`${spec.slot}/kubelet.config`, {
    description: `kubelet's configuration, kubeconfig and unit drop-in for ${spec.slot}`,
    // The credentials (a bootstrap token, a client key) are a sensitive input: a plan never shows them,
    // and the state keeps only a keyed digest of them.
    inputs: {
      rootfs: spec.rootfs,
      settings: ng.value(asJson({ ...spec.settings, auth: undefined })),
      auth: ng.value(asJson(spec.settings.auth), { sensitive: true }),
    },
    outputs: [...files.map((f) => f.path), dropIn],
    // As containerd's: kept when a slot goes; a client certificate's files go when a token replaces it.
    removeOutputs: 'dropped',
    after: [...spec.after],
    run: () => {
      for (const f of files) renderFile(f.path, f.content, { mode: f.mode });
      renderFile(dropIn, kubeletDropIn(spec.settings));
    },
  });
}

export interface CniConfigSpec extends SlotConfigBase {
  readonly settings: CniSettings;
  /** containerd's CNI configuration folder, as the node sees it. */
  readonly confDir: string;
}

export function cniConfigTask(ng: NodefileApi, spec: CniConfigSpec): TaskRef {
  const file = path.join(spec.rootfsDir, conflistPath(spec.settings, spec.confDir));
  return ng.task(`${spec.slot}/cni.config`, {
    description: `the pod network configuration for ${spec.slot}`,
    inputs: { rootfs: spec.rootfs, settings: ng.value(asJson(spec.settings)) },
    outputs: [file],
    after: [...spec.after],
    run: () => {
      renderFile(file, renderConflist(spec.settings));
    },
  });
}

/** The registry `config_path` a config.toml nodegraph wrote names (containerd 1.x's CRI plugin, or 2.x's images plugin). */
function configPathIn(toml: string): string | undefined {
  try {
    const plugins = fromToml(readFileSync(toml, 'utf8'))['plugins'] as Record<string, { registry?: { config_path?: unknown } }> | undefined;
    const found = Object.values(plugins ?? {}).map((p) => p.registry?.config_path).find((p) => typeof p === 'string');
    return found as string | undefined;
  } catch {
    return undefined;
  }
}

/** Removes registry folders nodegraph wrote earlier that the configuration no longer names. */
export function removeStaleHosts(certsDir: string, wanted: ReadonlySet<string>): void {
  let entries: string[];
  try {
    entries = readdirSync(certsDir);
  } catch {
    return;
  }
  for (const registry of entries) {
    if (wanted.has(registry)) continue;
    const file = path.join(certsDir, registry, 'hosts.toml');
    try {
      if (!readFileSync(file, 'utf8').startsWith('# Written by nodegraph')) continue;
    } catch {
      continue;
    }
    rmSync(file, { force: true });
    try {
      if (readdirSync(path.join(certsDir, registry)).length === 0) rmSync(path.join(certsDir, registry), { recursive: true });
    } catch {
      // someone else's files stay
    }
  }
}
