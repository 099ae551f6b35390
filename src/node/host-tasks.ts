// The node's tasks on the host itself: runc (installed when the configuration
// says so) with the lifecycle helper that stop and destroy steps call, and the
// host folders the slots share, each listed in the folder ledger (folders.ts)
// as made or found before it is made.

import { existsSync } from 'node:fs';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { execOf, lastLine, tryExec } from './exec.ts';
import type { Folders } from './folders.ts';
import { HELPER_SCRIPT, type Helper } from './helper.ts';
import { install, sourceInputs, type BinarySource } from './provision.ts';
import { asJson, renderFile } from './render.ts';
import type { RuncOptions } from './runc.ts';

export interface RuntimeTaskSpec {
  readonly runc: RuncOptions;
  /** Where runc comes from when nodegraph installs it; undefined: the host's own. */
  readonly install: BinarySource | undefined;
  /** The install's version stamp and download folder, as host paths. */
  readonly stamp: string;
  readonly scratch: string;
  readonly helper: Helper;
  readonly after: readonly TaskRef[];
}

export function runtimeTask(ng: NodefileApi, spec: RuntimeTaskSpec): TaskRef {
  const { runc, helper } = spec;
  const source = sourceInputs(ng, spec.install);
  return ng.task('host/runtime', {
    description: 'runc present, and the node lifecycle helper that stop and destroy steps call',
    inputs: { spec: ng.value(asJson({ runc, install: source.shown, helper: helper.path, script: HELPER_SCRIPT })), ...source.inputs },
    outputs: [helper.path],
    after: [...spec.after],
    run: async (ctx) => {
      const exec = execOf(ctx);
      if (spec.install !== undefined) {
        const source = spec.install;
        const outcome = await install(exec, { name: 'runc', source, dest: runc.binary, stamp: spec.stamp, expect: [runc.binary], scratch: spec.scratch });
        ctx.log(`runc ${outcome.version}: ${outcome.action}`);
      }
      const version = await tryExec(exec, [runc.binary, '--version']);
      if (version.exitCode !== 0) {
        const why = lastLine(version) || (version.exitCode === -1 ? 'not found' : `exit ${version.exitCode}`);
        throw new Error(`runc does not run at ${runc.binary} (${why}): install it (apt-get install runc) or set runtime.install`);
      }
      renderFile(helper.path, HELPER_SCRIPT, { mode: 0o755 });
      return { runc: version.stdout.split('\n')[0] ?? '' };
    },
    // What the task leaves is the helper: without it, nothing of the node's is here (runc may be the host's).
    check: async (ctx) => {
      if (!existsSync(helper.path)) return `the lifecycle helper ${helper.path} is missing`;
      const version = await tryExec(execOf(ctx), [runc.binary, '--version']);
      return version.exitCode === 0 || `runc --version failed: ${lastLine(version)}`;
    },
    // The helper goes with the task's outputs, after every step that calls it; its folder with host/folders.
  });
}

export interface HostDirSpec {
  readonly id: string;
  /** The folder, as a host path. */
  readonly dir: string;
  readonly description: string;
  readonly folders: Folders;
  /** What destroy runs (the helper's remove steps, which go only as far as the ledger says nodegraph made). */
  readonly destroy: readonly string[][];
  readonly after: readonly TaskRef[];
}

export function hostDirTask(ng: NodefileApi, spec: HostDirSpec): TaskRef {
  const { dir, folders } = spec;
  return ng.task(spec.id, {
    description: spec.description,
    inputs: { dir: ng.value(dir) },
    after: [...spec.after],
    run: () => {
      folders.ensure(dir);
      return { dir };
    },
    // Found as the ledger left it: a folder it does not name is none of the node's (what a destroy leaves).
    check: () => (!existsSync(dir) ? `${dir} is missing` : folders.origin(dir) !== undefined || `${dir} is not in nodegraph's folder ledger ${folders.ledger}`),
    ...(spec.destroy.length === 0 ? {} : { destroy: [...spec.destroy] }),
  });
}
