// The host folders the node's tasks make or rely on, in a ledger beside
// nodegraph's host files (`/var/lib/nodegraph/host-folders`): each folder as
// `made` (nodegraph created it, and each parent it created on the way) or
// `found` (it was there). Destroy removes only what is `made` — a shared
// folder whole, a parent once empty — and never a folder that was there
// before. A folder is listed before it is made, so a run cut short leaves no
// folder the ledger does not know.
//
// `host/folders` runs first and goes last: it makes the folders other host
// tasks write their files into (the engine would make an output's folder
// unlisted), and its destroy removes the empty folders the ledger says
// nodegraph made, then the ledger.

import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { renderFile } from './render.ts';

/** Where the ledger lives (a node path; put it through the host's root prefix). */
export const FOLDERS_PATH = '/var/lib/nodegraph/host-folders';

export type FolderOrigin = 'made' | 'found';

const HEADER = '# Written by nodegraph: host folders it made (destroy removes them) and found (destroy keeps them).';

export interface Folders {
  /** The ledger's host path. */
  readonly ledger: string;
  /** Makes `dir` and its missing parents, listing them first; what the ledger says of `dir` (made now or earlier, or found). */
  ensure(dir: string, mode?: number): FolderOrigin;
  /** What the ledger says of `dir`, or undefined when it does not name it. */
  origin(dir: string): FolderOrigin | undefined;
}

export function foldersAt(ledger: string): Folders {
  return {
    ledger,
    ensure: (dir, mode = 0o755) => {
      const listed = readLedger(ledger);
      const missing = [...missingChain(path.dirname(ledger)), ...missingChain(dir)];
      for (const p of missing) listed.set(p, 'made');
      if (!listed.has(dir)) listed.set(dir, 'found');
      renderFile(ledger, renderLedger(listed));
      mkdirSync(dir, { recursive: true, mode });
      return listed.get(dir)!;
    },
    origin: (dir) => readLedger(ledger).get(dir),
  };
}

/** `dir` and the parents above it that do not exist, outermost first; none when `dir` exists. */
export function missingChain(dir: string): string[] {
  if (!path.isAbsolute(dir) || dir.includes('\n')) throw new Error(`a host folder must be an absolute path on one line, not ${JSON.stringify(dir)}`);
  const chain: string[] = [];
  for (let p = path.resolve(dir); !existsSync(p); p = path.dirname(p)) chain.unshift(p);
  return chain;
}

export function parseLedger(text: string): Map<string, FolderOrigin> {
  const listed = new Map<string, FolderOrigin>();
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    const origin = line.slice(0, space);
    if (origin === 'made' || origin === 'found') listed.set(line.slice(space + 1), origin);
  }
  return listed;
}

/** One line per folder, sorted (a parent before what is below it), as the helper reads it. */
export function renderLedger(listed: ReadonlyMap<string, FolderOrigin>): string {
  const lines = [...listed].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([p, origin]) => `${origin} ${p}`);
  return `${[HEADER, ...lines].join('\n')}\n`;
}

function readLedger(ledger: string): Map<string, FolderOrigin> {
  try {
    return parseLedger(readFileSync(ledger, 'utf8'));
  } catch {
    return new Map();
  }
}

/**
 * The last step of a destroy, a command of its own (the lifecycle helper is gone by then): each
 * empty folder the ledger lists as made, deepest first (`sort -r`: a parent sorts before what is
 * below it), then the ledger, then its own folders. Run again after a cut, it finishes.
 */
export const FORGET_FOLDERS_SCRIPT = `ledger=$1
[ -f "$ledger" ] || exit 0
made=$(sed -n 's/^made //p' "$ledger" | LC_ALL=C sort -r)
prune() {
  printf '%s\\n' "$made" | while IFS= read -r dir; do
    if [ -n "$dir" ] && [ -d "$dir" ] && [ ! -L "$dir" ]; then rmdir "$dir" 2>/dev/null || true; fi
  done
}
prune
rm -f "$ledger"
prune`;

export interface FoldersTaskOptions {
  readonly folders: Folders;
  /** Host folders the other host tasks write files into, with their modes. */
  readonly dirs: readonly { readonly dir: string; readonly mode?: number }[];
}

/** `host/folders`: the folders host files go in, made through the ledger; destroyed last of all. */
export function foldersTask(ng: NodefileApi, o: FoldersTaskOptions): TaskRef {
  const { folders } = o;
  return ng.task('host/folders', {
    description: 'the host folders the node writes files into, each listed as made or found (destroy removes only what it made)',
    inputs: { dirs: ng.value(o.dirs.map((d) => ({ dir: d.dir, mode: d.mode ?? 0o755 }))), ledger: ng.value(folders.ledger) },
    run: () => {
      for (const d of o.dirs) folders.ensure(d.dir, d.mode);
    },
    check: () => {
      const missing = o.dirs.filter((d) => !existsSync(d.dir) || folders.origin(d.dir) === undefined).map((d) => d.dir);
      return missing.length === 0 || `not made or not in the folder ledger ${folders.ledger}: ${missing.join(', ')}`;
    },
    destroy: [['/bin/sh', '-c', FORGET_FOLDERS_SCRIPT, 'sh', folders.ledger]],
  });
}
