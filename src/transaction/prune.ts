// Pruning the generation store (generations.ts): the newest generations are
// kept (and always the current one and any pinned), the others' manifests
// removed first, then the objects only they named. Those are found from the
// parts no kept generation shares; the whole store is swept every SWEEP_EVERY
// generations, or beside a manifest that lists its files without parts. A kill
// between the two steps leaves objects no manifest names, which a sweep
// removes; an object a kept generation names is never removed, and nothing is
// when what a kept manifest or part names cannot be read.

import { readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { inObject, type SourceFile, type SourcePart, type StoredGeneration } from './manifest.ts';

/** A prune that removes a generation while the newest number is a multiple of this sweeps the store of what no kept manifest names (a crash's or a dropped pending generation's objects). */
export const SWEEP_EVERY = 16;

/** What pruning reads of the store. */
export interface PrunedStore {
  readonly dir: string;
  numbers(): number[];
  current(): number | undefined;
  head(n: number): StoredGeneration | undefined;
  part(part: SourcePart): readonly SourceFile[] | undefined;
  object(sha256: string): string;
}

/** Prunes to the newest `keep` (and `current`, `pinned`); `removeManifest` removes one; returns the numbers removed. */
export function pruneStore(
  store: PrunedStore,
  keep: number,
  pinned: readonly number[],
  sweepEvery: number,
  removeManifest: (n: number) => void,
  onStep?: (step: string) => void,
): number[] {
  const numbers = store.numbers();
  const current = store.current();
  const kept = new Set([...numbers.slice(-Math.max(1, keep)), ...pinned, ...(current === undefined ? [] : [current])]);
  const removed = numbers.filter((n) => !kept.has(n));
  if (removed.length === 0) return removed;
  const keptHeads = [...kept].map((n) => store.head(n));
  const removedHeads = removed.map((n) => store.head(n));
  for (const n of removed) {
    removeManifest(n);
    onStep?.('manifest removed');
  }
  const partsOnly = [...keptHeads, ...removedHeads].every((g) => g?.parts !== undefined);
  const gone = partsOnly && numbers.at(-1)! % sweepEvery !== 0 ? unnamed(store, keptHeads as StoredGeneration[], removedHeads as StoredGeneration[]) : sweep(store, keptHeads);
  for (const name of gone) {
    rmSync(store.object(name), { force: true });
    onStep?.('object removed');
  }
  return removed;
}

/** The objects the `removed` generations named and no `kept` one does (each names its files by parts). */
function unnamed(store: PrunedStore, kept: readonly StoredGeneration[], removed: readonly StoredGeneration[]): string[] {
  const keptParts = new Set(kept.flatMap((g) => g.parts!.map((p) => p.sha256)));
  const removedParts = new Set(removed.flatMap((g) => g.parts!.map((p) => p.sha256)));
  // The parts only removed generations named, and the objects their files are in: each goes
  // unless a kept part names it (a part's bytes could, however unlikely, be a source's too).
  const candidates = new Set<string>();
  for (const g of removed) {
    for (const part of g.parts!) {
      if (keptParts.has(part.sha256) || candidates.has(part.sha256)) continue;
      candidates.add(part.sha256);
      // A part that cannot be read any more: what it alone named stays until a sweep.
      for (const file of store.part(part) ?? []) if (inObject(file) && !keptParts.has(file.sha256)) candidates.add(file.sha256);
    }
  }
  // First the kept parts no removed generation had (the newer versions of the parts that
  // went, which name most candidates), then the rest.
  const order = [...keptParts].sort((a, b) => Number(removedParts.has(a)) - Number(removedParts.has(b)));
  for (const sha256 of order) {
    if (candidates.size === 0) break;
    let text: string;
    try {
      text = readFileSync(store.object(sha256), 'utf8');
    } catch {
      return []; // what a kept part names is unknown: nothing goes
    }
    if (candidates.size > 64) for (const m of text.matchAll(/"sha256":"([0-9a-f]{64})"/g)) candidates.delete(m[1]!);
    else for (const c of candidates) if (text.includes(`"sha256":"${c}"`)) candidates.delete(c);
  }
  return [...candidates];
}

/** Every object no kept manifest names (none when a kept manifest or part cannot be read: what it names is unknown). */
function sweep(store: PrunedStore, kept: readonly (StoredGeneration | undefined)[]): string[] {
  const named = new Set<string>();
  const read = new Set<string>();
  for (const g of kept) {
    if (g === undefined) return [];
    for (const file of g.files ?? []) named.add(file.sha256);
    for (const part of g.parts ?? []) {
      // Kept generations share most parts: each is read once.
      if (read.has(part.sha256)) continue;
      const files = store.part(part);
      if (files === undefined) return [];
      read.add(part.sha256);
      named.add(part.sha256);
      for (const file of files) named.add(file.sha256);
    }
  }
  let objects: string[] = [];
  try {
    objects = readdirSync(path.join(store.dir, 'objects'));
  } catch {
    // no store yet
  }
  return objects.filter((name) => !named.has(name));
}
