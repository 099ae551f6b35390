// The whole idea of nodegraph in one small graph that runs anywhere, as any
// user, writing only below ./example-node: an OS image archive unpacked,
// two configurations rendered from values, and two long-running services —
// stand-ins for containerd and kubelet, run by Debian's start-stop-daemon —
// each restarted only when its own configuration changed.
//
//   nodegraph apply -f Nodefile.example.ts            # first run: everything
//   edit example/settings.json (say containerd.logLevel)
//   nodegraph plan -f Nodefile.example.ts             # says what will restart, and why
//   nodegraph apply -f Nodefile.example.ts            # restarts containerd alone
//   nodegraph destroy -f Nodefile.example.ts --yes    # stops both, removes example-node/
//
// Every apply is atomic (ng.settings): set containerd.logLevel to "loud" and
// apply — the configuration is refused, the apply is rolled back, and
// example/settings.json is given back as the last generation had it.

import { readFileSync } from 'node:fs';
import type { NodefileApi, TaskRef } from './src/nodefile/types.ts';

const OUT = 'example-node';
const STOP = '/sbin/start-stop-daemon';
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'panic'];

interface Settings {
  readonly containerd: { readonly registryMirrors: Record<string, string[]>; readonly logLevel: string };
  readonly kubelet: { readonly clusterDNS: string[]; readonly maxPods: number };
}

export default function nodefile(ng: NodefileApi): void {
  const settings = JSON.parse(readFileSync(`${ng.dir}/example/settings.json`, 'utf8')) as Settings;
  ng.settings({ atomic: true });

  // The settings file as an input: each generation keeps it, so a rollback can give it back.
  ng.task('node/settings', { inputs: { file: ng.file('example/settings.json') }, run: () => {} });

  const layout = ng.task('node/layout', {
    description: 'the folders the node lives in',
    run: ['mkdir', '-p', `${OUT}/run`, `${OUT}/etc`],
    check: ['test', '-d', `${OUT}/run`],
    // Last to go: fails, and says so, if anything was left behind; a folder already gone (a destroy cut short, run again) is not a failure.
    destroy: [['rm', '-d', '-f', `${OUT}/run`, `${OUT}/etc`], ['rm', '-d', '-f', OUT]],
  });

  const rootfs = ng.task('node/rootfs', {
    description: 'the OS image, unpacked',
    inputs: { image: ng.file('example/os-image.tar.gz') },
    outputs: [`${OUT}/rootfs`],
    after: [layout],
    version: '1',
    run: async (ctx) => {
      // Unpack beside the old tree and swap, so a failed unpack leaves the old one whole.
      await ctx.exec(['rm', '-rf', `${OUT}/rootfs.new`]);
      await ctx.exec(['mkdir', '-p', `${OUT}/rootfs.new`]);
      await ctx.exec(['tar', '-xf', 'example/os-image.tar.gz', '-C', `${OUT}/rootfs.new`]);
      await ctx.exec(['rm', '-rf', `${OUT}/rootfs`]);
      await ctx.exec(['mv', `${OUT}/rootfs.new`, `${OUT}/rootfs`]);
    },
  });

  const containerdConfig = ng.task('containerd/config', {
    inputs: { settings: ng.value(settings.containerd) },
    outputs: [`${OUT}/etc/containerd.toml`],
    after: [layout],
    version: '1',
    run: async (ctx) => {
      const s = ctx.value('settings') as Settings['containerd'];
      // As containerd itself refuses to start with an unknown level.
      if (!LOG_LEVELS.includes(s.logLevel)) throw new Error(`containerd.logLevel must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(s.logLevel)}`);
      const mirrors = Object.entries(s.registryMirrors)
        .map(([host, endpoints]) => `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."${host}"]\nendpoint = ${JSON.stringify(endpoints)}\n`)
        .join('\n');
      await ctx.writeIfChanged(`${OUT}/etc/containerd.toml`, `version = 2\n\n[debug]\nlevel = "${s.logLevel}"\n\n${mirrors}`, { mode: 0o644 });
    },
  });

  const kubeletConfig = ng.task('kubelet/config', {
    inputs: { settings: ng.value(settings.kubelet) },
    outputs: [`${OUT}/etc/kubelet.yaml`],
    after: [layout],
    version: '1',
    run: async (ctx) => {
      const s = ctx.value('settings') as Settings['kubelet'];
      const dns = s.clusterDNS.map((ip) => `  - ${ip}\n`).join('');
      await ctx.writeIfChanged(
        `${OUT}/etc/kubelet.yaml`,
        `apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n${dns}maxPods: ${s.maxPods}\n`,
        { mode: 0o644 },
      );
    },
  });

  const service = (name: string, config: TaskRef, configPath: string, after: TaskRef[]): TaskRef => {
    // start-stop-daemon wants absolute paths for what the daemon opens.
    const pidfile = `${ng.dir}/${OUT}/run/${name}.pid`;
    const status = [STOP, '--status', '--pidfile', pidfile];
    const stop = [STOP, '--stop', '--pidfile', pidfile, '--remove-pidfile', '--retry', 'TERM/5/KILL/5', '--oknodo'];
    return ng.task(`${name}/service`, {
      description: `the ${name} stand-in, supervised by start-stop-daemon`,
      // Trigger edges: a new image or a new configuration restarts it; nothing else does.
      inputs: { config, rootfs },
      after,
      verbs: { create: 'start', update: 'restart' },
      check: status,
      stop: [stop],
      destroy: [['rm', '-f', `${ng.dir}/${OUT}/run/${name}.log`]],
      version: '1',
      run: async (ctx) => {
        await ctx.exec(stop);
        await ctx.exec([
          STOP, '--start', '--background', '--make-pidfile', '--pidfile', pidfile,
          '--output', `${ng.dir}/${OUT}/run/${name}.log`,
          '--startas', `${ng.dir}/${OUT}/rootfs/usr/bin/stand-in-service`, '--', name, `${ng.dir}/${configPath}`,
        ]);
        // Up means: the process is there a moment later (a bad config makes it exit at once).
        await new Promise((resolve) => setTimeout(resolve, 200));
        await ctx.exec(status);
      },
    });
  };

  const containerd = service('containerd', containerdConfig, `${OUT}/etc/containerd.toml`, [layout]);
  service('kubelet', kubeletConfig, `${OUT}/etc/kubelet.yaml`, [layout, containerd]);
}
