// Host kernel modules a node needs (overlay, br_netfilter, …): the list
// systemd-modules-load reads at boot, and a load now of what is missing.
// The running kernel decides "missing", as the lifecycle helper reads it:
// a module in /proc/modules is loaded, one with only a /sys/module folder is
// built in (or loaded on a kernel without /proc/modules).

import { existsSync } from 'node:fs';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { execOf, lastLine, tryExec, type Exec } from './exec.ts';
import type { Helper } from './helper.ts';
import { renderFile } from './render.ts';

/** Where systemd-modules-load finds the node's list (a node path). */
export const MODULES_LOAD_PATH = '/etc/modules-load.d/nodegraph.conf';

export function renderModulesLoad(modules: readonly string[]): string {
  return ['# Written by nodegraph: kernel modules the Kubernetes node needs, loaded at boot.', ...modules, ''].join('\n');
}

export type ModuleState = 'loaded' | 'built-in' | 'missing';

/** The helper's `kernel-modules` lines, `<module> <state>`, as a map. */
export function parseModuleStates(stdout: string): Map<string, ModuleState> {
  const states = new Map<string, ModuleState>();
  for (const line of stdout.split('\n')) {
    const [module, state] = line.trim().split(' ');
    if (module !== undefined && (state === 'loaded' || state === 'built-in' || state === 'missing')) states.set(module, state);
  }
  return states;
}

/** The wanted modules the running kernel has neither loaded nor built in. */
export async function missingModules(exec: Exec, helper: Helper, modules: readonly string[]): Promise<string[]> {
  const result = await tryExec(exec, helper.kernelModules(...modules));
  if (result.exitCode !== 0) throw new Error(`reading the kernel's modules failed: ${lastLine(result) || result.failure}`);
  const states = parseModuleStates(result.stdout);
  return modules.filter((m) => (states.get(m) ?? 'missing') === 'missing');
}

/** modprobe each module; one that will not load fails with its name and modprobe's own words. */
export async function loadModules(exec: Exec, modules: readonly string[]): Promise<void> {
  for (const module of modules) {
    const result = await tryExec(exec, ['modprobe', module]);
    if (result.exitCode === 0) continue;
    const why = lastLine(result) || result.failure || `exit ${result.exitCode}`;
    throw new Error(`kernel module ${module} is neither loaded nor built in (/proc/modules, /sys/module), and modprobe ${module} failed: ${why}`);
  }
}

export interface KernelModulesOptions {
  readonly modules: readonly string[];
  /** The modules-load list's host path. */
  readonly file: string;
  /** The lifecycle helper reads the kernel's state: it must be installed first (an order edge in `after`). */
  readonly helper: Helper;
  readonly after: readonly TaskRef[];
}

/** `host/kernel-modules`: the host's modules-load list, and a load now of what the running kernel lacks. */
export function kernelModulesTask(ng: NodefileApi, o: KernelModulesOptions): TaskRef {
  return ng.task('host/kernel-modules', {
    description: `kernel modules the node needs (${o.modules.join(', ')}), loaded now and at boot`,
    inputs: { modules: ng.value([...o.modules]) },
    outputs: [o.file],
    after: o.after,
    run: async (ctx) => {
      renderFile(o.file, renderModulesLoad(o.modules));
      const missing = await missingModules(execOf(ctx), o.helper, o.modules);
      if (missing.length > 0) ctx.log(`loading ${missing.join(', ')}`);
      await loadModules(execOf(ctx), missing);
    },
    // The list is what the task leaves: modules loaded without it may be the kernel's own.
    check: async (ctx) => {
      if (!existsSync(o.file)) return `${o.file} is missing`;
      const missing = await missingModules(execOf(ctx), o.helper, o.modules);
      return missing.length === 0 || `not loaded: ${missing.join(', ')}`;
    },
    verbs: { create: 'load', update: 'load' },
  });
}
