// Rendered files: written only when the bytes, the mode or the owner differ,
// atomically (a temporary sibling renamed into place), so a reader never sees
// half a file and an unchanged render leaves the file — and its hash — alone.

import { chmodSync, chownSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Json } from '../nodefile/types.ts';

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

export interface RenderOptions {
  /** Permission bits, e.g. 0o600 for a file holding a token. Default 0o644. */
  readonly mode?: number;
  /** Changed only when given (changing an owner needs root). */
  readonly owner?: Owner;
  /** Mode of directories created on the way. Default 0o755. */
  readonly dirMode?: number;
}

export type RenderOutcome = 'created' | 'updated' | 'unchanged';

export function renderFile(file: string, content: string | Uint8Array, options: RenderOptions = {}): RenderOutcome {
  const bytes = Buffer.from(content);
  const mode = options.mode ?? 0o644;
  let existing: { bytes: Buffer; mode: number; uid: number; gid: number } | undefined;
  try {
    const stat = statSync(file);
    if (stat.isFile()) existing = { bytes: readFileSync(file), mode: stat.mode & 0o7777, uid: stat.uid, gid: stat.gid };
  } catch {
    existing = undefined;
  }
  const ownerDiffers = (e: { uid: number; gid: number }): boolean =>
    options.owner !== undefined && (e.uid !== options.owner.uid || e.gid !== options.owner.gid);
  if (existing !== undefined && existing.bytes.equals(bytes)) {
    if (existing.mode === mode && !ownerDiffers(existing)) return 'unchanged';
    // Same bytes: fix the metadata in place.
    chmodSync(file, mode);
    if (options.owner !== undefined) chownSync(file, options.owner.uid, options.owner.gid);
    return 'updated';
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: options.dirMode ?? 0o755 });
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.nodegraph-${process.pid}.tmp`);
  try {
    writeFileSync(temp, bytes, { mode });
    chmodSync(temp, mode); // the umask may have taken bits away
    if (options.owner !== undefined) chownSync(temp, options.owner.uid, options.owner.gid);
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  return existing === undefined ? 'created' : 'updated';
}

/** Renders several files; true when any of them changed. */
export function renderFiles(files: readonly RenderedFile[]): boolean {
  let changed = false;
  for (const f of files) if (renderFile(f.path, f.content, f) !== 'unchanged') changed = true;
  return changed;
}

export interface RenderedFile extends RenderOptions {
  /** Absolute host path. */
  readonly path: string;
  readonly content: string;
}

/** A value input is plain JSON: undefined fields dropped, as the hash will see it. */
export const asJson = (value: unknown): Json => JSON.parse(JSON.stringify(value)) as Json;
