// Binaries put into the node from configured sources (kubelet, crictl, CNI
// plugins, …): a single executable or a tar archive unpacked into a folder.
// Each install leaves a stamp with the version it put there, and is skipped
// when the stamp already names the wanted version and the files are there.

import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { sha256File } from './archive.ts';
import type { NodefileApi, TaskInput, TaskRef } from '../nodefile/types.ts';
import { execOf, lastLine, tryExec, type Exec } from './exec.ts';
import { asJson, renderFile } from './render.ts';
import { splitUrl } from './secrets.ts';

export const binarySourceSchema = z.strictObject({
  version: z.string().min(1),
  /** An https URL (fetched with curl) or a local path (absolute, or relative to the config file). */
  source: z.string().min(1),
  /** Expected sha256 of what `source` holds (hex); checked before anything is installed. */
  sha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, '64 hex digits')
    // Some tools print it in capitals (PowerShell's Get-FileHash): the same digest.
    .transform((hex) => hex.toLowerCase())
    .optional(),
  /** 'binary' copies one executable; 'tar' unpacks an archive into the destination folder. */
  format: z.enum(['binary', 'tar']).optional(),
});
export type BinarySource = z.infer<typeof binarySourceSchema>;

export interface InstallSpec {
  /** A short name: kubelet, crictl, cni-plugins. */
  readonly name: string;
  readonly source: BinarySource;
  /** Host path of the file ('binary') or folder ('tar') to install to. */
  readonly dest: string;
  /** Host path of the stamp that records the installed version. */
  readonly stamp: string;
  /** Host paths that must exist for the install to count as present. */
  readonly expect: readonly string[];
  /** A folder for downloads (host path). */
  readonly scratch: string;
}

export const formatOf = (s: BinarySource): 'binary' | 'tar' =>
  s.format ?? (/\.(tar|tgz|tar\.(gz|xz|zst|bz2))$/.test(new URL(s.source, 'file:///').pathname) ? 'tar' : 'binary');

interface Stamp {
  readonly version: string;
  readonly sha256: string;
}

function readStamp(file: string): Stamp | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<Stamp>;
    return typeof parsed.version === 'string' && typeof parsed.sha256 === 'string' ? { version: parsed.version, sha256: parsed.sha256 } : undefined;
  } catch {
    return undefined;
  }
}

export const isPresent = (spec: InstallSpec): boolean =>
  readStamp(spec.stamp)?.version === spec.source.version && spec.expect.every((p) => existsSync(p));

export type InstallOutcome = { readonly name: string; readonly version: string; readonly action: 'present' | 'installed' };

/** The source as a plan and an error show it: a URL's userinfo and query hidden. */
export const shownSource = (s: BinarySource): BinarySource => ({ ...s, source: splitUrl(s.source).shown });

/**
 * A source as task inputs: the shown source as a plain value, and a URL that carries credentials as a
 * sensitive one of its own, so that a new token re-runs the install without being shown or stored.
 */
export function sourceInputs(ng: NodefileApi, s: BinarySource | undefined): { shown: BinarySource | null; inputs: Readonly<Record<string, TaskInput>> } {
  if (s === undefined) return { shown: null, inputs: {} };
  const { secret } = splitUrl(s.source);
  return { shown: shownSource(s), inputs: secret === undefined ? {} : { sourceUrl: ng.value(secret, { sensitive: true }) } };
}

export async function install(exec: Exec, spec: InstallSpec): Promise<InstallOutcome> {
  const { name, source } = spec;
  const shown = splitUrl(source.source).shown;
  if (isPresent(spec)) return { name, version: source.version, action: 'present' };

  const remote = /^https?:\/\//.test(source.source);
  let file = source.source;
  if (remote) {
    mkdirSync(spec.scratch, { recursive: true });
    file = path.join(spec.scratch, `${name}-${source.version}.download`);
    // The URL goes on curl's standard input, as its config: a token in it is not on a command line that ps shows.
    const config = `url = "${source.source.replace(/[\\"]/g, '\\$&')}"\n`;
    const got = await tryExec(exec, ['curl', '--fail', '--silent', '--show-error', '--location', '--retry', '3', '--output', file, '--config', '-'], { input: config });
    if (got.exitCode !== 0) throw new Error(`could not download ${name} ${source.version} from ${shown}: ${lastLine(got)}`);
  }
  try {
    // A local source is read first here: its failure names what it is for, not only the file.
    const sha256 = await sha256File(file).catch((error: unknown) => {
      throw new Error(`could not read ${name} ${source.version} from ${shown}: ${(error as Error).message}`);
    });
    if (source.sha256 !== undefined && sha256 !== source.sha256) {
      throw new Error(`${name} ${source.version} from ${shown} has sha256 ${sha256}, not the configured ${source.sha256}`);
    }
    if (formatOf(source) === 'tar') {
      mkdirSync(spec.dest, { recursive: true });
      const unpacked = await tryExec(exec, ['tar', '--extract', `--file=${file}`, `--directory=${spec.dest}`, '--no-same-owner']);
      if (unpacked.exitCode !== 0) throw new Error(`could not unpack ${name} ${source.version}: ${lastLine(unpacked)}`);
    } else {
      mkdirSync(path.dirname(spec.dest), { recursive: true });
      const temp = `${spec.dest}.nodegraph-new`;
      copyFileSync(file, temp);
      renderFile(spec.dest, readFileSync(temp), { mode: 0o755 });
      rmSync(temp, { force: true });
    }
    renderFile(spec.stamp, `${JSON.stringify({ version: source.version, sha256 })}\n`);
  } finally {
    if (remote) rmSync(file, { force: true });
  }
  return { name, version: source.version, action: 'installed' };
}

/** A task that installs one binary (or archive) and says so; `rootfs`, when it installs into one, is its upstream. */
export function provisionTask(ng: NodefileApi, id: string, spec: InstallSpec, after: readonly TaskRef[], rootfs?: TaskRef): TaskRef {
  const source = sourceInputs(ng, spec.source);
  return ng.task(id, {
    description: `${spec.name} ${spec.source.version} from ${source.shown!.source}`,
    inputs: { spec: ng.value(asJson({ ...spec, source: source.shown })), ...source.inputs, ...(rootfs === undefined ? {} : { rootfs }) },
    after: [...after],
    run: async (ctx) => {
      const outcome = await install(execOf(ctx), spec);
      ctx.log(`${spec.name} ${outcome.version}: ${outcome.action}`);
      return { name: spec.name, version: spec.source.version };
    },
    check: () => isPresent(spec) || `${spec.name} ${spec.source.version} is not installed at ${spec.dest}`,
    verbs: { create: 'install', update: 'install' },
  });
}
