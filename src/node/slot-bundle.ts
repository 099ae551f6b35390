// A slot's OCI bundle: config.json rendered from the node's parameters, an
// optional base config, and the GPU grants <slot>/gpu wrote (read when it runs,
// so a new device number rewrites it).

import { readFileSync } from 'node:fs';
import type { NodefileApi, TaskInput, TaskRef } from '../nodefile/types.ts';
import { bundleConfig, validateOciSpec, type BundleParams, type OciSpec } from './bundle.ts';
import type { GpuGrants } from './gpu.ts';
import { asJson, renderFile } from './render.ts';

export interface BundleTaskSpec {
  readonly slot: string;
  /** Host path of the bundle's config.json. */
  readonly configJson: string;
  /** What the node sets, without the GPU grants and the base (read when the task runs). */
  readonly params: Omit<BundleParams, 'devices' | 'base'>;
  /** A config.json to start from (the configuration's bundle.base). */
  readonly baseFile: string | undefined;
  /** The grants' input, when the slot has a GPU task, and the grants as they are when the task runs. */
  readonly inputs?: Readonly<Record<string, TaskInput>>;
  readonly grants: () => GpuGrants;
  readonly after: readonly TaskRef[];
}

export function bundleTask(ng: NodefileApi, spec: BundleTaskSpec): TaskRef {
  const { params, baseFile } = spec;
  return ng.task(`${spec.slot}/bundle`, {
    description: `the OCI bundle's config.json for ${spec.slot}`,
    inputs: { spec: ng.value(asJson(params)), ...spec.inputs, ...(baseFile === undefined ? {} : { base: ng.file(baseFile) }) },
    outputs: [spec.configJson],
    after: [...spec.after],
    run: () => {
      const base = baseFile === undefined ? undefined : readBase(baseFile);
      const { devices, mounts } = spec.grants();
      const all = { ...params, devices, extraMounts: [...mounts, ...(params.extraMounts ?? [])], ...(base === undefined ? {} : { base }) };
      renderFile(spec.configJson, `${JSON.stringify(bundleConfig(all), null, 2)}\n`);
    },
  });
}

/** The configuration's base config.json, checked as an OCI runtime config; a failure names the setting and the file. */
export function readBase(file: string): OciSpec {
  let spec: unknown;
  try {
    spec = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`bundle.base ${file} ${error instanceof SyntaxError ? 'is not JSON' : 'cannot be read'}: ${(error as Error).message}`);
  }
  const checked = validateOciSpec(spec);
  if (!checked.ok) throw new Error(`bundle.base ${file} is not an OCI runtime config: ${checked.error.join('; ')}`);
  return checked.value;
}
