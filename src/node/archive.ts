// An OS image becomes a slot's rootfs: a tar archive (gzip, xz or zstd —
// tar recognises the compression itself) or an OCI image layout directory
// (index.json → manifest → layers in order, honouring whiteouts). Either is
// unpacked into a sibling staging directory and swapped in whole, so a
// failed unpack never leaves half a rootfs behind.

import { createReadStream, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { ExecResult } from '../nodefile/types.ts';
import { lastLine, tryExec, type Exec } from './exec.ts';
import { removePath } from '../util/mounts.ts';
import { isFolder } from '../util/realpath.ts';
// Graphs ask it of an image path; they import the node kit, not nodegraph's own helpers.
export { isFolder } from '../util/realpath.ts';

const { createHash } = process.getBuiltinModule('node:crypto');

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export interface UnpackOptions {
  /** Restore numeric owners from the archive (needs root). Default: when running as root. */
  readonly preserveOwners?: boolean;
  /** For an image index with several platforms. Default: linux and this machine's architecture. */
  readonly platform?: { readonly os: string; readonly architecture: string };
  /**
   * Leave the replaced rootfs at `<rootfs>.old` instead of removing it. A
   * container still running on it needs its files to shut down (systemd
   * halts by running systemd-shutdown); remove it once the container has
   * restarted on the new one.
   */
  readonly keepOld?: boolean;
  /** A path the unpacked tree must hold (`sbin/init`): without it the rootfs in place is not replaced. */
  readonly mustHave?: string;
}

export interface UnpackResult {
  /** `sha256:…` of the archive, or of the image manifest for an OCI layout. */
  readonly digest: string;
  readonly kind: 'archive' | 'oci-layout';
  /** With keepOld: where the replaced rootfs was left, if there was one. */
  readonly old?: string;
}

/** Holds `entry` (a symlink counts: it may point into the tree as the container will see it). */
function holds(tree: string, entry: string): boolean {
  try {
    lstatSync(path.join(tree, entry));
    return true;
  } catch {
    return false;
  }
}

export const isOciLayout = (source: string): boolean =>
  existsSync(path.join(source, 'index.json')) && existsSync(path.join(source, 'oci-layout'));

/** The digest an image source will unpack as, without unpacking it. */
export async function imageDigest(source: string, options: UnpackOptions = {}): Promise<string> {
  if (isOciLayout(source)) return selectManifest(source, options).digest;
  return `sha256:${await sha256File(source)}`;
}

/** Unpacks `source` (archive file or OCI layout) to `rootfs`, replacing what was there. */
export async function unpackImage(exec: Exec, source: string, rootfs: string, options: UnpackOptions = {}): Promise<UnpackResult> {
  const staging = `${rootfs}.new`;
  removeTree(staging);
  mkdirSync(staging, { recursive: true, mode: 0o755 });
  try {
    let result: UnpackResult;
    if (isOciLayout(source)) {
      result = { digest: await unpackOciLayout(exec, source, staging, options), kind: 'oci-layout' };
    } else {
      if (isFolder(source)) throw new Error(`image ${source} is a folder but not an OCI image layout (no oci-layout and index.json in it): give a tar archive or an OCI image layout`);
      const digest = `sha256:${await sha256File(source)}`;
      await extract(exec, source, staging, options);
      result = { digest, kind: 'archive' };
    }
    if (options.mustHave !== undefined && !holds(staging, options.mustHave)) {
      throw new Error(`image ${source} has no /${options.mustHave}: it is not an image the node can boot; ${rootfs} is left as it was`);
    }
    const old = swapIn(staging, rootfs, options.keepOld ?? false);
    return old === undefined ? result : { ...result, old };
  } catch (error) {
    removeTree(staging);
    throw error;
  }
}

const ownerFlags = (o: UnpackOptions): string[] =>
  (o.preserveOwners ?? process.getuid?.() === 0) ? ['--same-owner', '--numeric-owner'] : ['--no-same-owner'];

function extractArgv(archive: string, dest: string, o: UnpackOptions, extra: readonly string[] = []): string[] {
  return [
    'tar',
    '--extract',
    `--file=${archive}`,
    `--directory=${dest}`,
    '--preserve-permissions',
    ...ownerFlags(o),
    '--xattrs',
    '--xattrs-include=security.capability',
    '--xattrs-include=user.*',
    ...extra,
  ];
}

/** tar's (or its decompressor's) own reason: its closing lines only say that it failed. */
export function tarReason(result: ExecResult): string {
  const closing = /^tar: (Exiting with failure status due to previous errors|Error is not recoverable: exiting now|Child returned status \d+)$/;
  const lines = result.stderr.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !closing.test(l));
  return lines.slice(0, 3).join('; ') || lastLine(result) || `tar exited with ${result.exitCode}`;
}

async function extract(exec: Exec, archive: string, dest: string, o: UnpackOptions, extra: readonly string[] = []): Promise<void> {
  const result = await tryExec(exec, extractArgv(archive, dest, o, extra));
  if (result.exitCode !== 0) throw new Error(`could not unpack ${archive}: ${tarReason(result)}`);
}

/**
 * Puts `staging` where `target` is, moving the old tree aside to
 * `<target>.old`, and removing it unless asked to keep it. Returns where the
 * old tree was kept.
 */
export function swapIn(staging: string, target: string, keepOld = false): string | undefined {
  const old = `${target}.old`;
  removeTree(old);
  if (!existsSync(target)) {
    mkdirSync(path.dirname(target), { recursive: true });
    renameSync(staging, target);
    return undefined;
  }
  renameSync(target, old);
  renameSync(staging, target);
  if (keepOld) return old;
  removeTree(old);
  return undefined;
}

/** Removes a tree (see removePath), throwing when something is mounted in it or it cannot be removed. */
export function removeTree(dir: string): void {
  const problem = removePath(dir);
  if (problem !== undefined) throw new Error(problem);
}

function isSymlink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

// ---- OCI image layout -------------------------------------------------------

const descriptorSchema = z.looseObject({
  mediaType: z.string(),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'a sha256 digest'),
  size: z.number().int().nonnegative(),
  platform: z.looseObject({ os: z.string(), architecture: z.string() }).optional(),
});
type Descriptor = z.infer<typeof descriptorSchema>;
const indexSchema = z.looseObject({ schemaVersion: z.literal(2), manifests: z.array(descriptorSchema).min(1) });
const manifestSchema = z.looseObject({ schemaVersion: z.literal(2), layers: z.array(descriptorSchema) });

const INDEX_TYPES = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);

const blobPath = (layout: string, digest: string): string => path.join(layout, 'blobs', 'sha256', digest.slice('sha256:'.length));

function readJsonBlob<T>(layout: string, d: Descriptor, schema: z.ZodType<T>, what: string): T {
  const bytes = readFileSync(blobPath(layout, d.digest));
  const actual = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  if (actual !== d.digest) throw new Error(`${what} ${d.digest} does not match its content (${actual})`);
  return parseJson(bytes.toString('utf8'), schema, `${what} ${d.digest}`);
}

function parseJson<T>(text: string, schema: z.ZodType<T>, what: string): T {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new Error(`${what} is not valid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

const goArch: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' };

function choose(list: readonly Descriptor[], o: UnpackOptions, where: string): Descriptor {
  if (list.length === 1) return list[0]!;
  const want = o.platform ?? { os: 'linux', architecture: goArch[process.arch] ?? process.arch };
  const match = list.find((d) => d.platform?.os === want.os && d.platform.architecture === want.architecture);
  if (match === undefined) throw new Error(`${where} has no image for ${want.os}/${want.architecture}`);
  return match;
}

/** Follows index.json (and nested indexes) to the one image manifest to unpack. */
export function selectManifest(layout: string, o: UnpackOptions = {}): Descriptor {
  const index = parseJson(readFileSync(path.join(layout, 'index.json'), 'utf8'), indexSchema, `${layout}/index.json`);
  let d = choose(index.manifests, o, `${layout}/index.json`);
  for (let depth = 0; INDEX_TYPES.has(d.mediaType); depth++) {
    if (depth > 4) throw new Error(`${layout}: image indexes nested too deeply`);
    d = choose(readJsonBlob(layout, d, indexSchema, 'image index').manifests, o, `image index ${d.digest}`);
  }
  return d;
}

async function unpackOciLayout(exec: Exec, layout: string, dest: string, o: UnpackOptions): Promise<string> {
  const manifestRef = selectManifest(layout, o);
  const manifest = readJsonBlob(layout, manifestRef, manifestSchema, 'image manifest');
  for (const layer of manifest.layers) {
    const blob = blobPath(layout, layer.digest);
    const actual = `sha256:${await sha256File(blob)}`;
    if (actual !== layer.digest) throw new Error(`layer ${layer.digest} does not match its content (${actual})`);
    const listing = await tryExec(exec, ['tar', '--list', `--file=${blob}`, '--quoting-style=literal']);
    if (listing.exitCode !== 0) throw new Error(`could not read layer ${layer.digest}: ${tarReason(listing)}`);
    const members = listing.stdout.split('\n').filter((l) => l !== '');
    // Whiteouts hide what lower layers made; this layer's own files are extracted after.
    applyWhiteouts(dest, members);
    checkMemberParents(dest, members);
    // Layers lean on the lower layers' directory symlinks (lib → usr/lib), so those are followed;
    // checkMemberParents made sure none of them leads out of the rootfs.
    await extract(exec, blob, dest, o, ['--keep-directory-symlink', '--exclude=.wh.*']);
  }
  return manifestRef.digest;
}

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

/** A member name as a relative path without `./` or trailing `/`; undefined if it would leave the root. */
export function memberPath(name: string): string | undefined {
  const normal = path.posix.normalize(name.replace(/^\/+/, '')).replace(/\/+$/, '');
  if (normal === '.' || normal === '') return '';
  if (normal === '..' || normal.startsWith('../')) return undefined;
  return normal;
}

/**
 * Applies a layer's whiteouts to the tree below `root` (the lower layers):
 * `.wh.<name>` removes `<name>`; `.wh..wh..opq` empties its directory.
 * Nothing is removed through a symlinked directory.
 */
export function applyWhiteouts(root: string, members: readonly string[]): void {
  for (const raw of members) {
    const member = memberPath(raw);
    if (member === undefined || member === '') continue;
    const base = path.posix.basename(member);
    if (!base.startsWith(WHITEOUT)) continue;
    const parent = path.posix.dirname(member) === '.' ? '' : path.posix.dirname(member);
    if (!realDirectoryChain(root, parent)) continue;
    if (base === OPAQUE) {
      const dir = path.join(root, parent);
      for (const child of safeList(dir)) rmSync(path.join(dir, child), { recursive: true, force: true });
    } else {
      const name = base.slice(WHITEOUT.length);
      if (name === '' || name === '.' || name === '..') continue;
      rmSync(path.join(root, parent, name), { recursive: true, force: true });
    }
  }
}

/** True when every component of `rel` below `root` is a real directory (no symlink). */
function realDirectoryChain(root: string, rel: string): boolean {
  let at = root;
  for (const part of rel === '' ? [] : rel.split('/')) {
    at = path.join(at, part);
    try {
      const s = lstatSync(at);
      if (!s.isDirectory()) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/** Refuses a layer that would write through a symlink leading out of the rootfs. */
function checkMemberParents(root: string, members: readonly string[]): void {
  const realRoot = realpathSync(root);
  const seen = new Set<string>();
  for (const raw of members) {
    const member = memberPath(raw);
    if (member === undefined) throw new Error(`layer member ${raw} leaves the rootfs`);
    const parts = member.split('/').slice(0, -1);
    let rel = '';
    for (const part of parts) {
      rel = rel === '' ? part : `${rel}/${part}`;
      if (seen.has(rel)) continue;
      seen.add(rel);
      const at = path.join(root, rel);
      if (!isSymlink(at)) continue;
      let target: string;
      try {
        target = realpathSync(at);
      } catch {
        continue; // a dangling link: tar replaces it
      }
      if (target !== realRoot && !target.startsWith(`${realRoot}/`)) {
        throw new Error(`layer writes ${raw} through ${rel}, a symlink that leads out of the rootfs`);
      }
    }
  }
}

function safeList(dir: string): string[] {
  try {
    if (!statSync(dir).isDirectory()) return [];
    return readdirSync(dir);
  } catch {
    return [];
  }
}
