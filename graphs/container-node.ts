// The container node as a graph: a Kubernetes node whose kubelet and
// containerd run in a runc container with systemd as PID 1, in slot kube1 or
// kube2. Its configuration is the JSON file named by NODEGRAPH_NODE_CONFIG
// (see graphs/README.md and graphs/node.example.json).
//
//   host/runtime ─┬─ host/layout ─── <slot>/rootfs ─┬─ <slot>/provision.* ─┐
//                 ├─ host/kubelet-dir ─┐            ├─ <slot>/containerd.config ─┐
//                 ├─ host/cni ─────────┤            ├─ <slot>/kubelet.config ────┤
//                 ├─ host/certs.d ─────┤            └─ <slot>/cni.config         │
//                 ├─ host/run-containerd            <slot>/bundle ── <slot>/unit │
//                 │        (configuration waits for <slot>/takeover: built, then the other slot stops)
//                 ├─ host/bpffs ───────┘                                         │
//                 └─ host/kernel-modules ────────────────────────────────────────▼
//     <slot>/container ──▶ <slot>/containerd ──(after)──▶ <slot>/kubelet ──▶ <slot>/verified
//                                   └──(after)──▶ <slot>/image/<archive> ──(after)──┘
//
// Trigger edges carry the restart rules: the container restarts when its
// bundle, rootfs or the command that runs it changed (a rewritten unit is
// only reloaded); containerd when its config (or the container) changed;
// kubelet likewise; kubelet runs after containerd, so when both changed
// containerd goes first. A service whose container was (re)started in the
// same apply is waited for (systemd starts it at boot once enabled), never
// restarted. A staged image archive is imported when it or the rootfs (the
// image store) changed, never because containerd restarted.
//
// A slot switch: the slot switched away from is not declared until the switch
// is done (frozen), then stopped in place (`retire: 'stop'`), so a rollback or
// a switch back finds its rootfs, bundle and kubelet identity where they were.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskInput, TaskRef } from '../src/nodefile/types.ts';
import { isFolder } from '../src/node/archive.ts';
import { grantableCapabilities, sharedPaths, type Mount } from '../src/node/bundle.ts';
import { FOLDERS_PATH, foldersAt, foldersTask, type Folders } from '../src/node/folders.ts';
import { gpuFiles, gpuTask, nvidiaTask, readGrants, NO_GRANTS, type GpuGrants } from '../src/node/gpu.ts';
import { HELPER_PATH, helperAt, type Helper } from '../src/node/helper.ts';
import { makeHost, type Host } from '../src/node/host.ts';
import { imageArchiveTasks } from '../src/node/images.ts';
import { kernelModulesTask, MODULES_LOAD_PATH } from '../src/node/kernel-modules.ts';
import { switchingFrom, takeoverTask, type SlotPlace } from '../src/node/takeover.ts';
import { switchMarkerOf } from '../src/node/switch.ts';
import { provisionTask, type InstallSpec } from '../src/node/provision.ts';
import { hostDirTask, runtimeTask } from '../src/node/host-tasks.ts';
import { bundleTask } from '../src/node/slot-bundle.ts';
import { cniConfigTask, containerdConfigTask, kubeletConfigTask } from '../src/node/slot-config.ts';
import { containerTask, unitTask, type SlotRun } from '../src/node/slot-run.ts';
import { serviceTask, verifiedTask } from '../src/node/slot-services.ts';
import { digestFileOf, rootfsOf, rootfsTask } from '../src/node/rootfs.ts';
import type { RuncOptions } from '../src/node/runc.ts';
import { unitName, unitPath, type ContainerSpec, type Supervisor } from '../src/node/supervise.ts';
import { CONFIG_ENV, containerIdOf, kubeletSettingsOf, readNodeConfig, SLOTS, type NodeConfig, type Slot } from './node-config.ts';

/** What every task builder below needs to know about the node. */
interface Node {
  readonly config: NodeConfig;
  readonly configFile: string;
  readonly host: Host;
  readonly runc: RuncOptions;
  readonly helper: Helper;
  /** The host folders the node made or found (folders.ts): destroy removes only what it made. */
  readonly folders: Folders;
  readonly supervisor: Supervisor;
}

interface Shared {
  readonly runtime: TaskRef;
  readonly layout: TaskRef;
  readonly kubeletDir: TaskRef;
  readonly cni: TaskRef;
  readonly certsDir: TaskRef;
  readonly runContainerd: TaskRef;
  readonly bpffs: TaskRef;
  readonly cniPlugins: TaskRef | undefined;
  readonly imageArchives: TaskRef | undefined;
  readonly kernelModules: TaskRef | undefined;
}

export default function containerNode(ng: NodefileApi): void {
  const configFile = process.env[CONFIG_ENV];
  if (configFile === undefined || configFile === '') {
    throw new Error(`${CONFIG_ENV} is not set: point it at the node's configuration file (see graphs/README.md)`);
  }
  const node = makeNode(path.resolve(configFile));
  const { config, host } = node;
  const others = SLOTS.map((slot) => ({ slot, containerId: containerIdOf(config, slot) }));
  const from = switchingFrom(node.runc, switchMarkerOf(host.path(config.layoutDir)), config.slot, others);
  const switching = SLOTS.filter((slot) => from.includes(slot));
  // A change to a running node either proves healthy or is undone; a slot switch is a blue/green
  // upgrade, atomic whatever the flags.
  ng.settings({ atomic: switching.length > 0 ? 'always' : true });
  // What both slots see at the same host paths, and a failed change must give back byte for byte; and
  // the switch marker, so that a rollback leaves no switch under way.
  ng.preserve(
    host.path('/var/lib/kubelet/pki'),
    ...(config.cluster.bootstrapToken === undefined ? [] : [host.path('/var/lib/kubelet/kubeconfig')]),
    host.path('/opt/cni'),
    host.path(config.containerd.certsDir),
    switchMarkerOf(host.path(config.layoutDir)),
  );
  const shared = declareHost(ng, node);
  // A slot's tasks, no longer declared, are stopped and kept in place: declared again, it is found as it was.
  const slots: NodefileApi = { ...ng, task: (id, spec) => ng.task(id, { retire: 'stop', ...spec }) };
  declareRunning(slots, node, shared, declarePlace(slots, node, shared, config.slot, 'run'), switching);
  // The slot a switch is under way from is frozen: not declared, so nothing of it changes until the
  // new slot is healthy — then it is stopped in place (retire: 'stop'), and prepared again after.
  for (const slot of config.prepare) if (!switching.includes(slot)) declarePlace(slots, node, shared, slot, 'prepare');
}

function makeNode(configFile: string): Node {
  const config = readNodeConfig(configFile);
  const host = makeHost(config.root);
  const supervisor: Supervisor = config.supervisor === 'auto' ? (host.hasSystemd() ? 'systemd' : 'runc') : config.supervisor;
  const stateRoot = config.runtime.stateRoot ?? (host.root === '/' ? undefined : '/run/runc');
  // The runtime is the host's own unless nodegraph installs it: only then does it live below the root prefix.
  const runc: RuncOptions = {
    binary: config.runtime.install === undefined ? config.runtime.runc : host.path(config.runtime.runc),
    ...(stateRoot === undefined ? {} : { stateRoot: host.path(stateRoot) }),
  };
  return { config, configFile, host, runc, helper: helperAt(host.path(HELPER_PATH)), folders: foldersAt(host.path(FOLDERS_PATH)), supervisor };
}

// ---- the host: runtime and the directories every slot shares ---------------

function declareHost(ng: NodefileApi, node: Node): Shared {
  const { config, host, helper, folders } = node;
  const ledger = folders.ledger;

  ng.task('host/config', {
    description: 'the node configuration file (read each time the graph loads)',
    inputs: { path: ng.env(CONFIG_ENV), file: ng.file(node.configFile) },
    run: () => ({ nodeName: config.nodeName, slot: config.slot }),
  });

  // First and last: the folders the host tasks' files go in (runc makes its state folder itself: made here first).
  const hostFolders = foldersTask(ng, {
    folders,
    dirs: [
      { dir: path.dirname(helper.path) },
      ...(config.kernelModules.length === 0 ? [] : [{ dir: path.dirname(host.path(MODULES_LOAD_PATH)) }]),
      ...(node.supervisor === 'systemd' ? [{ dir: path.dirname(host.path(unitPath(containerIdOf(config, config.slot)))) }] : []),
      ...(node.runc.stateRoot === undefined ? [] : [{ dir: node.runc.stateRoot, mode: 0o700 }]),
    ],
  });

  const runtime = runtimeTask(ng, {
    runc: node.runc,
    install: config.runtime.install,
    stamp: host.path('/var/lib/nodegraph/runc.version.json'),
    scratch: host.path('/var/lib/nodegraph/downloads'),
    helper,
    after: [hostFolders],
  });

  const dir = (id: string, nodePath: string, description: string, destroy: string[][]): TaskRef =>
    hostDirTask(ng, { id, dir: host.path(nodePath), description, folders, destroy, after: [runtime] });

  const kubeletDir = host.path('/var/lib/kubelet');
  const runContainerd = host.path('/run/containerd');
  // Each shared folder goes whole with the node only if nodegraph made it; the parents it made on the way go
  // last, once empty (host/folders).
  const shared: Shared = {
    runtime,
    layout: dir('host/layout', config.layoutDir, 'the folder that holds the slots', [helper.removeUnlessMounted(host.path(config.layoutDir), ledger)]),
    // Pod volumes are mounted below the kubelet directory: unmount them once
    // no slot runs, and keep the directory if one will not go.
    kubeletDir: dir('host/kubelet-dir', '/var/lib/kubelet', 'kubelet state shared by the slots (identity, pods, config)', [
      helper.unmountBelow(kubeletDir),
      helper.removeUnlessMounted(kubeletDir, ledger),
    ]),
    cni: dir('host/cni', '/opt/cni/bin', 'CNI binaries shared by the slots', [
      helper.remove(host.path('/opt/cni'), ledger),
      helper.remove(host.path('/opt/cni/bin'), ledger),
    ]),
    certsDir: dir('host/certs.d', config.containerd.certsDir, 'containerd registry hosts shared by the slots', [
      helper.remove(host.path(config.containerd.certsDir), ledger),
    ]),
    runContainerd: dir('host/run-containerd', '/run/containerd', "containerd's sockets, shared with the host", [
      helper.unmountBelow(runContainerd),
      helper.removeUnlessMounted(runContainerd, ledger),
    ]),
    bpffs: dir('host/bpffs', '/sys/fs/bpf', 'the BPF filesystem the container shares', [helper.removeUnlessMounted(host.path('/sys/fs/bpf'), ledger)]),
    cniPlugins: undefined,
    // The operator's staged archives: the folder is made if missing, and goes only if nodegraph made it and it is empty.
    imageArchives:
      config.imageArchiveDir === undefined
        ? undefined
        : dir('host/image-archives', config.imageArchiveDir, 'staged image archives the slots import', [helper.pruneMade(ledger, host.path(config.imageArchiveDir))]),
    kernelModules:
      config.kernelModules.length === 0
        ? undefined
        : kernelModulesTask(ng, { modules: config.kernelModules, file: host.path(MODULES_LOAD_PATH), helper, after: [runtime] }),
  };

  if (config.binaries.cniPlugins !== undefined) {
    const spec: InstallSpec = {
      name: 'cni-plugins',
      source: config.binaries.cniPlugins,
      dest: host.path('/opt/cni/bin'),
      stamp: host.path('/opt/cni/nodegraph-cni-plugins.json'),
      expect: [host.path('/opt/cni/bin/bridge'), host.path('/opt/cni/bin/host-local')],
      scratch: host.path('/var/lib/nodegraph/downloads'),
    };
    return { ...shared, cniPlugins: provisionTask(ng, 'host/cni.plugins', spec, [shared.cni]) };
  }
  return shared;
}

// ---- a slot ----------------------------------------------------------------

/** What a slot is built of, prepared or running: its files and the tasks that make them. */
interface SlotPlaceTasks {
  readonly slot: Slot;
  readonly slotDir: string;
  readonly rootfsDir: string;
  readonly container: ContainerSpec;
  readonly stopContainer: string[];
  readonly rootfs: TaskRef;
  readonly provisioned: readonly TaskRef[];
  readonly kubeletBinary: TaskRef | undefined;
  readonly configJson: string;
  readonly bundle: TaskRef;
  readonly unit: TaskRef | undefined;
  readonly gpu: TaskRef | undefined;
  readonly grantsFile: string;
  readonly gpuInput: Record<string, TaskInput>;
  readonly grants: () => GpuGrants;
}

/** Rootfs, binaries, GPU grants, bundle and unit: a prepared slot has these, and nothing runs. */
function declarePlace(ng: NodefileApi, node: Node, shared: Shared, slot: Slot, role: 'run' | 'prepare'): SlotPlaceTasks {
  const { config, host, helper } = node;
  const slotDir = host.path(`${config.layoutDir}/${slot}`);
  const containerId = containerIdOf(config, slot);
  const container: ContainerSpec = {
    id: containerId,
    runc: node.runc,
    bundle: slotDir,
    consoleLog: path.join(slotDir, 'console.log'),
    stopTimeoutSeconds: config.timeouts.stop,
  };

  // Image → rootfs. The image's hash is the input: the same image is never
  // unpacked twice, and a new one replaces the rootfs whole.
  const supervisingUnit = node.supervisor === 'systemd' ? unitName(containerId) : undefined;
  const stopContainer = helper.stopContainer(node.runc, containerId, config.timeouts.stop, supervisingUnit);
  const rootfs = rootfsTask(ng, {
    id: `${slot}/rootfs`,
    image: config.image,
    // Any folder is a tree: one that is not an OCI layout is refused by the unpack, in the image's words.
    imageInput: isFolder(config.image) ? ng.tree(config.image) : ng.file(config.image),
    slotDir,
    // A running container needs its old rootfs to shut down: the container task removes it after the restart.
    keepOld: role === 'run',
    after: [shared.layout],
    stopContainer,
    removeSlot: helper.remove(slotDir),
  });
  const { provisioned, kubeletBinary } = declareBinaries(ng, config, slot, slotDir, rootfs);

  // The OCI bundle, with the GPUs <slot>/gpu grants (discovered again on every run).
  const configJson = path.join(slotDir, 'config.json');
  const { grantsFile, seenFile } = gpuFiles(slotDir);
  const gpu = config.gpu === 'auto' ? gpuTask(ng, { slot, host, rootfs, grantsFile, seenFile, configJson }) : undefined;
  const grants = () => (gpu === undefined ? NO_GRANTS : readGrants(grantsFile));
  const gpuInput: Record<string, TaskInput> = gpu === undefined ? {} : { gpu: gpu.output(grantsFile) };
  const bundle = bundleTask(ng, {
    slot,
    configJson,
    params: bundleParams(node, slot),
    baseFile: config.bundle.base,
    inputs: gpuInput,
    grants,
    after: [rootfs, shared.kubeletDir, shared.cni, shared.certsDir, shared.runContainerd, shared.bpffs, ...present(shared.imageArchives)],
  });

  const unitFile = host.path(unitPath(containerId));
  const unit =
    node.supervisor === 'systemd'
      ? unitTask(ng, { slot, container, file: unitFile, remove: helper.unitRemove(unitFile, unitName(containerId)), after: [bundle] })
      : undefined;

  const rootfsDir = rootfsOf(slotDir);
  return { slot, slotDir, rootfsDir, container, stopContainer, rootfs, provisioned, kubeletBinary, configJson, bundle, unit, gpu, grantsFile, gpuInput, grants };
}

/** kubelet and crictl from the configuration's sources, into the slot's rootfs. */
function declareBinaries(ng: NodefileApi, config: NodeConfig, slot: Slot, slotDir: string, rootfs: TaskRef): { provisioned: TaskRef[]; kubeletBinary: TaskRef | undefined } {
  const inRootfs = (nodePath: string): string => path.join(rootfsOf(slotDir), nodePath);
  const binaries = config.binaries;
  const scratch = path.join(slotDir, 'downloads');
  const kubeletBinary =
    binaries.kubelet === undefined
      ? undefined
      : provisionTask(
          ng,
          `${slot}/provision.kubelet`,
          {
            name: 'kubelet',
            source: { ...binaries.kubelet, version: binaries.kubelet.version ?? config.kubernetesVersion },
            dest: inRootfs(config.kubelet.binary),
            stamp: inRootfs('/var/lib/nodegraph/provisioned/kubelet.json'),
            expect: [inRootfs(config.kubelet.binary)],
            scratch,
          },
          [],
          rootfs,
        );
  const crictl =
    binaries.crictl === undefined
      ? undefined
      : provisionTask(
          ng,
          `${slot}/provision.crictl`,
          {
            name: 'crictl',
            source: binaries.crictl,
            dest: inRootfs('/usr/local/bin'),
            stamp: inRootfs('/var/lib/nodegraph/provisioned/crictl.json'),
            expect: [inRootfs('/usr/local/bin/crictl')],
            scratch,
          },
          [],
          rootfs,
        );
  return { provisioned: [...present(kubeletBinary), ...present(crictl)], kubeletBinary };
}

/** What the bundle's config.json says of the node, before the GPU grants and a base config. */
function bundleParams(node: Node, slot: Slot) {
  const { config, host } = node;
  return {
    hostname: config.nodeName,
    rootfs: 'rootfs',
    shared: sharedPaths(config.containerd.certsDir).map((destination) => ({ destination, source: host.path(destination) })),
    hostNetwork: config.hostNetwork,
    // What the process running runc may pass on (runc refuses more).
    capabilities: grantableCapabilities(readIfThere('/proc/self/status')),
    extraMounts: [...imageArchiveMounts(node), ...config.bundle.extraMounts],
    annotations: { 'org.nodegraph.slot': slot, ...config.bundle.annotations },
    ...(config.bundle.hooks === undefined ? {} : { hooks: config.bundle.hooks }),
    ...(config.bundle.cgroupsPath === undefined ? {} : { cgroupsPath: config.bundle.cgroupsPath }),
  };
}

/** The running slot: takeover, configuration, container, containerd, kubelet, staged images, verified. */
function declareRunning(ng: NodefileApi, node: Node, shared: Shared, place: SlotPlaceTasks, switching: readonly string[]): void {
  const { config, host, helper } = node;
  const { slot, rootfs, rootfsDir, provisioned, bundle, unit, gpu } = place;

  // ---- taking over: the old slot stops only once this one is built ----------

  const cni = config.cni === false ? undefined : config.cni;
  const placeOf = (s: Slot): SlotPlace => ({ slot: s, containerId: containerIdOf(config, s), identityDir: path.join(host.path(config.layoutDir), s, 'identity') });
  const marker = switchMarkerOf(host.path(config.layoutDir));
  const takeover = takeoverTask(ng, {
    self: placeOf(slot),
    others: SLOTS.filter((other) => other !== slot).map(placeOf),
    marker,
    runc: node.runc,
    helper,
    supervisor: node.supervisor,
    stopTimeoutSeconds: config.timeouts.stop,
    kubeletDir: host.path('/var/lib/kubelet'),
    bootstrappedKubeconfig: config.cluster.bootstrapToken === undefined ? undefined : host.path('/var/lib/kubelet/kubeconfig'),
    hostNetwork: config.hostNetwork && cni !== undefined ? { bridge: cni.bridge, ipamDir: host.path(`/var/lib/cni/networks/${cni.name}`) } : undefined,
    after: [rootfs, ...provisioned, bundle, ...present(unit)],
    running: switching,
  });

  // ---- configuration: into the rootfs, and the same-path shared folders ----

  const configBase = { slot, rootfsDir, rootfs };
  const containerdConfig = containerdConfigTask(ng, {
    ...configBase,
    settings: config.containerd,
    registryMirrors: config.registryMirrors,
    certsDir: host.path(config.containerd.certsDir),
    hostPath: (p) => host.path(p),
    inputs: place.gpuInput,
    nvidia: () => place.grants().devices.length > 0,
    after: [shared.certsDir, takeover],
  });
  const kubeletConfig = kubeletConfigTask(ng, {
    ...configBase,
    settings: kubeletSettingsOf(config, node.configFile),
    hostPath: (p) => host.path(p),
    after: [shared.kubeletDir, takeover],
  });
  const cniConfig = cni === undefined ? undefined : cniConfigTask(ng, { ...configBase, settings: cni, confDir: config.containerd.cniConfDir, after: [takeover] });

  // ---- running: the container, then containerd, then kubelet -------------

  const run: SlotRun = { slot, container: place.container, timeouts: config.timeouts };
  const container = containerTask(ng, {
    run,
    supervisor: node.supervisor,
    bundle,
    rootfs,
    rootfsDir,
    bundleFiles: [place.configJson, rootfsDir, digestFileOf(place.slotDir)],
    sharedRoot: config.sharedRoot,
    stop: place.stopContainer,
    // Configuration goes in before the container boots, so its services start with it; and the other
    // slot is stopped first, even when this slot's configuration is in place already (found in place,
    // nothing of it runs, so nothing else orders the two).
    after: [
      takeover,
      containerdConfig,
      kubeletConfig,
      ...present(cniConfig),
      ...provisioned,
      shared.runtime,
      ...present(unit),
      ...present(shared.kernelModules),
    ],
  });

  // On a GPU node, containerd and kubelet run on the NVIDIA state rebuilt after the container started.
  const containerId = place.container.id;
  const nvidia = gpu === undefined ? undefined : nvidiaTask(ng, { slot, containerId, runc: node.runc, container, gpu, grantsFile: place.grantsFile });
  const serviceBase = { run, container, helper };
  const containerd = serviceTask(ng, { ...serviceBase, name: 'containerd', inputs: { config: containerdConfig }, after: present(nvidia), reload: false });
  const kubelet = serviceTask(ng, {
    ...serviceBase,
    name: 'kubelet',
    inputs: { config: kubeletConfig, ...(place.kubeletBinary === undefined ? {} : { binary: place.kubeletBinary }) },
    after: [containerd],
    reload: true,
  });

  const images = imageArchiveTasks(ng, {
    slot,
    containerId,
    runc: node.runc,
    nodeDir: config.imageArchiveDir,
    hostDir: config.imageArchiveDir === undefined ? undefined : host.path(config.imageArchiveDir),
    ledgerDir: path.join(place.slotDir, 'images'),
    prune: config.imageArchivePrune,
    rootfs,
    containerd,
  });

  verifiedTask(ng, { run, containerd, kubelet, after: [...present(cniConfig), ...images], marker });
}

// ---- helpers ---------------------------------------------------------------

const present = <T>(x: T | undefined): T[] => (x === undefined ? [] : [x]);

/** The staged archives' folder, read-only at the same path in the container. */
function imageArchiveMounts(node: Node): Mount[] {
  const dir = node.config.imageArchiveDir;
  return dir === undefined ? [] : [{ destination: dir, type: 'bind', source: node.host.path(dir), options: ['rbind', 'ro'] }];
}

function readIfThere(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
