// Restoring a generation's sources (generations.ts, restore), and what it found and changed.

import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from '../error.ts';
import { sha256FileSync } from '../hash/file.ts';
import { HASH_PREFIX } from '../ids.ts';
import { err, ok, type Result } from '../util/result.ts';
import { inObject, type Generation, type SourceFile } from './manifest.ts';

/** The SHA-256 of a regular file at `file`; '' for anything else. */
export function currentSha256(file: string): string {
  try {
    return lstatSync(file).isFile() ? sha256FileSync(file).hash.slice(HASH_PREFIX) : '';
  } catch {
    return '';
  }
}

/** What restoring a generation's sources changed: files written back, files it did not have removed. */
export interface Restored {
  readonly written: readonly string[];
  readonly removed: readonly string[];
}

/** `restored a, b; removed c`, paths relative to `base`; '' when nothing changed. */
export function describeRestored(r: Restored, base: string): string {
  const rel = (ps: readonly string[]): string => ps.map((p) => path.relative(base, p) || p).join(', ');
  const parts = [...(r.written.length > 0 ? [`restored ${rel(r.written)}`] : []), ...(r.removed.length > 0 ? [`removed ${rel(r.removed)}`] : [])];
  return parts.join('; ');
}

/** What restoring reads of the store. */
export interface RestoringStore<E> {
  readonly dir: string;
  verify(n: number): Result<Generation, E>;
  survey(): { generations: Generation[] };
  object(sha256: string): string;
}

/**
 * Puts generation `n`'s sources back at their paths (verified first, unless
 * the caller's `checked` is verify()'s result: a damaged generation changes
 * nothing). Only files whose content differs are
 * written, each atomically. A file its evaluation found absent is removed
 * only when another kept generation read that path with its present
 * content: then nothing is lost (the store holds it, and rolling forward
 * gives it back). Any other file there — edited since, or made by someone
 * else, a task's undeclared output — may be the only copy, and stays.
 * Folders are not made or emptied.
 * Returns the paths it rewrote or removed.
 */
export function restoreSources<E>(
  store: RestoringStore<E>,
  n: number,
  checked?: Generation,
): Result<Restored, E | Extract<Failure, { reason: 'generation-write-failed' | 'generation-would-overwrite' }>> {
  const verified = checked === undefined ? store.verify(n) : ok(checked);
  if (!verified.ok) return verified;
  const written: string[] = [];
  const removed: string[] = [];
  let held: Set<string> | undefined;
  const heldNow = (): Set<string> => (held ??= heldBesides(store, n));
  // Each file read once: one that has other content changes, and that content must be held elsewhere (an edit
  // not applied yet would be lost): otherwise nothing is written.
  const changing: SourceFile[] = [];
  const only: string[] = [];
  for (const file of verified.value.files) {
    if (file.stored === 'path') continue;
    const now = currentSha256(file.path);
    if (now === file.sha256) continue;
    changing.push(file);
    if (now !== '' && !heldNow().has(`${file.path}\0${now}`)) only.push(file.path);
  }
  if (only.length > 0) return err({ reason: 'generation-would-overwrite', number: n, paths: only });
  try {
    for (const file of changing) {
      mkdirSync(path.dirname(file.path), { recursive: true });
      const temp = path.join(path.dirname(file.path), `.${path.basename(file.path)}.${process.pid}.restore`);
      if (file.stored === 'inline') writeFileSync(temp, Buffer.from(file.content ?? '', 'base64'));
      else copyFileSync(store.object(file.sha256), temp);
      chmodSync(temp, file.mode);
      renameSync(temp, file.path);
      written.push(file.path);
    }
    const absent = (verified.value.probes ?? []).filter((p) => p.kind === 'absent');
    for (const probe of absent) {
      if (!heldNow().has(`${probe.path}\0${currentSha256(probe.path)}`)) continue;
      rmSync(probe.path);
      removed.push(probe.path);
    }
  } catch (error) {
    return err({ reason: 'generation-write-failed', path: removed.at(-1) ?? written.at(-1) ?? store.dir, message: (error as Error).message });
  }
  return ok({ written, removed });
}

/** Path and SHA-256 of every file the kept generations other than `n` hold in the store. */
function heldBesides(store: RestoringStore<unknown>, n: number): Set<string> {
  const held = new Set<string>();
  for (const generation of store.survey().generations) {
    if (generation.number === n) continue;
    for (const file of generation.files) if (file.stored === 'inline' || (inObject(file) && existsSync(store.object(file.sha256)))) held.add(`${file.path}\0${file.sha256}`);
  }
  return held;
}
