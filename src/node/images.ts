// Staged container images: archives (OCI or docker-archive tarballs) in a host
// folder that the node container sees at the same path, imported into
// containerd's k8s.io namespace once containerd runs. One task per archive,
// so the plan names each and why. A slot's ledger (one file per archive in
// its folder) remembers what was imported, so an archive taken out of the
// folder is still a task: its images are left in containerd, or pruned when
// the configuration says so.

import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { NodefileApi, TaskRef } from '../nodefile/types.ts';
import { execOf, lastLine, tryExec, type Exec } from './exec.ts';
import { renderFile } from './render.ts';
import { execInArgv, type RuncOptions } from './runc.ts';

/** containerd's namespace for what kubelet (the CRI) uses. */
export const CRI_NAMESPACE = 'k8s.io';

/** An archive's name is part of a task id. */
const ARCHIVE_NAME = /^[A-Za-z0-9_.:@+-]+\.tar$/;

/** The `*.tar` files in a folder, sorted; none when the folder is not there. A name no task id can hold is an error. */
export function listArchives(hostDir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(hostDir, { withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.tar'))
      .map((e) => e.name);
  } catch {
    return [];
  }
  const bad = names.filter((n) => !ARCHIVE_NAME.test(n));
  if (bad.length > 0) {
    throw new Error(`imageArchiveDir ${hostDir}: archive names are letters, digits and _.:@+- ending in .tar; rename ${bad.map((n) => JSON.stringify(n)).join(', ')}`);
  }
  return names.sort();
}

/** What the ledger says of one archive. */
export interface LedgerEntry {
  readonly archive: string;
  /** The image names the import created. */
  readonly refs: readonly string[];
  readonly state: 'imported' | 'pruned';
}

export function readLedger(ledgerDir: string): Map<string, LedgerEntry> {
  const entries = new Map<string, LedgerEntry>();
  let files: string[];
  try {
    files = readdirSync(ledgerDir).filter((f) => f.endsWith('.tar.json'));
  } catch {
    return entries;
  }
  for (const file of files) {
    try {
      const entry = JSON.parse(readFileSync(path.join(ledgerDir, file), 'utf8')) as LedgerEntry;
      if (Array.isArray(entry.refs)) entries.set(file.slice(0, -'.json'.length), entry);
    } catch {
      // unreadable: the archive is a new one as far as the ledger knows
    }
  }
  return entries;
}

const ctrArgv = (runc: RuncOptions, id: string, ...args: string[]): string[] => execInArgv(runc, id, ['ctr', '-n', CRI_NAMESPACE, ...args]);

/** `ctr images import` names each image it creates: `unpacking <ref> (sha256:…)...done`. */
export function importedRefs(stdout: string): string[] {
  const refs = new Set<string>();
  for (const m of stdout.matchAll(/^unpacking (\S+) \(sha256:[0-9a-f]{64}\)/gm)) refs.add(m[1]!);
  return [...refs];
}

/** Imports one archive (a path inside the container); fails with containerd's own words. */
export async function importArchive(exec: Exec, runc: RuncOptions, id: string, archive: string): Promise<string[]> {
  const result = await tryExec(exec, ctrArgv(runc, id, 'images', 'import', archive));
  if (result.exitCode !== 0) throw new Error(`containerd could not import ${archive}: ${lastLine(result) || result.failure || `exit ${result.exitCode}`}`);
  return importedRefs(result.stdout);
}

/** `ctr images ls` rows: reference and the digest it points at. */
export function parseImageList(stdout: string): { ref: string; digest: string }[] {
  return stdout
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((cols) => cols.length >= 3 && cols[2]!.startsWith('sha256:'))
    .map((cols) => ({ ref: cols[0]!, digest: cols[2]! }));
}

/**
 * Removes an archive's images: its names, and the `sha256:` name the CRI
 * gives each image, once no other name points at the same manifest.
 */
export async function pruneImages(exec: Exec, runc: RuncOptions, id: string, refs: readonly string[]): Promise<string[]> {
  const listed = await tryExec(exec, ctrArgv(runc, id, 'images', 'ls'));
  if (listed.exitCode !== 0) throw new Error(`ctr images ls failed: ${lastLine(listed)}`);
  const rows = parseImageList(listed.stdout);
  const ours = new Set(refs);
  const digests = new Set(rows.filter((r) => ours.has(r.ref)).map((r) => r.digest));
  const named = new Set(rows.filter((r) => !ours.has(r.ref) && !r.ref.startsWith('sha256:')).map((r) => r.digest));
  const remove = rows.filter((r) => ours.has(r.ref) || (r.ref.startsWith('sha256:') && digests.has(r.digest) && !named.has(r.digest))).map((r) => r.ref);
  if (remove.length === 0) return [];
  const removed = await tryExec(exec, ctrArgv(runc, id, 'images', 'rm', ...remove));
  if (removed.exitCode !== 0) throw new Error(`ctr images rm ${remove.join(' ')} failed: ${lastLine(removed)}`);
  return remove;
}

export interface ImageArchiveOptions {
  readonly slot: string;
  /** runc's id of the slot's container. */
  readonly containerId: string;
  readonly runc: RuncOptions;
  /** The archives' folder as the container sees it (a node path), and as the host does; undefined when unset. */
  readonly nodeDir: string | undefined;
  readonly hostDir: string | undefined;
  /** The slot's ledger folder (host path). */
  readonly ledgerDir: string;
  readonly prune: boolean;
  /** A new rootfs is a new, empty image store: a trigger edge. */
  readonly rootfs: TaskRef;
  /** containerd must run before anything is imported: an order edge, so its restart imports nothing. */
  readonly containerd: TaskRef;
}

/** One task per staged archive, and one per archive the ledger remembers that is no longer staged. */
export function imageArchiveTasks(ng: NodefileApi, o: ImageArchiveOptions): TaskRef[] {
  const staged = o.hostDir === undefined ? [] : listArchives(o.hostDir);
  const ledger = readLedger(o.ledgerDir);
  const names = [...new Set([...staged, ...ledger.keys()])].sort();
  return names.map((name) => {
    const ledgerFile = path.join(o.ledgerDir, `${name}.json`);
    const present = staged.includes(name);
    const archive = present ? path.posix.join(o.nodeDir!, name) : (ledger.get(name)?.archive ?? name);
    const remembered = ledger.get(name);
    const common = {
      outputs: [ledgerFile],
      after: [o.containerd],
      // One definition whatever the archive's fate: the plan's reason is then the input that changed.
      version: 'image-archive 1',
      // What the ledger says goes with the task (the images stay in the slot's store): an archive
      // taken away, or a slot retired, leaves no record behind; imported again, it is quick.
      retire: 'destroy' as const,
    };
    if (present) {
      return ng.task(`${o.slot}/image/${name}`, {
        description: `the images of ${archive}, imported into containerd (${CRI_NAMESPACE}) in ${o.slot}`,
        inputs: { archive: ng.file(path.join(o.hostDir!, name)), rootfs: o.rootfs },
        ...common,
        run: async (ctx) => {
          const refs = await importArchive(execOf(ctx), o.runc, o.containerId, archive);
          ctx.log(`imported ${archive}: ${refs.join(', ') || '(no named image)'}`);
          mkdirSync(o.ledgerDir, { recursive: true });
          renderFile(ledgerFile, `${JSON.stringify({ archive, refs, state: 'imported' } satisfies LedgerEntry)}\n`);
        },
        verbs: { create: 'import', update: 'import' },
      });
    }
    const refs = remembered?.state === 'imported' ? remembered.refs : [];
    return ng.task(`${o.slot}/image/${name}`, {
      description: `${archive} is no longer staged: its images ${o.prune ? 'are removed from' : 'stay in'} containerd`,
      inputs: { archive: ng.value({ removed: archive, prune: o.prune }) },
      ...common,
      run: async (ctx) => {
        if (!o.prune) {
          ctx.log(`${archive} is no longer staged; left in containerd: ${refs.join(', ') || '(nothing)'}`);
          return;
        }
        const removed = await pruneImages(execOf(ctx), o.runc, o.containerId, refs);
        ctx.log(`${archive} is no longer staged; removed from containerd: ${removed.join(', ') || '(nothing)'}`);
        renderFile(ledgerFile, `${JSON.stringify({ archive, refs: [], state: 'pruned' } satisfies LedgerEntry)}\n`);
      },
      verbs: o.prune ? { update: 'prune from containerd' } : { update: 'leave in containerd' },
    });
  });
}
