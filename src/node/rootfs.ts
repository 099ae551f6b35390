// A slot's rootfs as a task: the OS image unpacked into `<slot>/rootfs`
// (archive.ts), its digest beside it. Tearing it down removes the slot's
// folder, and first stops the slot's container by its id: nothing may run
// from a folder that is gone.
//
// An unpack cut short (a kill) leaves `<rootfs>.new`, complete or not: the
// check names it, so plan and status show it, and the next run removes it —
// without unpacking again when the rootfs in place is already of this image.

import { existsSync, lstatSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Argv, InputSpec, NodefileApi, TaskRef } from '../nodefile/types.ts';
import { imageDigest, removeTree, unpackImage } from './archive.ts';
import { execOf } from './exec.ts';
import { renderFile } from './render.ts';

export interface RootfsSpec {
  /** The task id: `<slot>/rootfs`. */
  readonly id: string;
  /** The OS image: an archive file or an OCI layout directory. */
  readonly image: string;
  /** The image as an input (its content hash). */
  readonly imageInput: InputSpec;
  /** The slot's folder, which holds the rootfs, its digest, the bundle and the console log. */
  readonly slotDir: string;
  /** Keep the replaced tree at `<rootfs>.old` (a running container shuts down from it). */
  readonly keepOld: boolean;
  readonly after: readonly TaskRef[];
  /** Stops the slot's container by id, whatever is left of its folder (before the folder goes). */
  readonly stopContainer: Argv;
  /** Removes the slot's folder. */
  readonly removeSlot: Argv;
}

export const rootfsOf = (slotDir: string): string => path.join(slotDir, 'rootfs');
export const digestFileOf = (slotDir: string): string => path.join(slotDir, 'rootfs.digest');
/** Where an unpack stages the new tree before swapping it in. */
export const stagingOf = (rootfs: string): string => `${rootfs}.new`;

export function rootfsTask(ng: NodefileApi, spec: RootfsSpec): TaskRef {
  const rootfs = rootfsOf(spec.slotDir);
  const digestFile = digestFileOf(spec.slotDir);
  const staging = stagingOf(rootfs);
  return ng.task(spec.id, {
    description: `the OS image unpacked into ${rootfs}`,
    inputs: { image: spec.imageInput, spec: ng.value({ image: spec.image, rootfs }) },
    outputs: [digestFile],
    after: [...spec.after],
    run: async (ctx) => {
      if (existsSync(staging)) {
        const digest = await imageDigest(spec.image);
        removeTree(staging);
        // Left by an unpack cut short: when the tree in place is this image already, that is all there is to do.
        if (hasInit(rootfs) && readDigest(digestFile) === digest) {
          ctx.log(`removed ${staging}, left by an unpack cut short; ${rootfs} is ${digest} already`);
          return { digest, tree: treeOf(rootfs) };
        }
      }
      const result = await unpackImage(execOf(ctx), spec.image, rootfs, { keepOld: spec.keepOld, mustHave: 'sbin/init' });
      renderFile(digestFile, `${result.digest}\n`);
      ctx.log(`unpacked ${result.kind} ${result.digest}`);
      return { digest: result.digest, tree: treeOf(rootfs) };
    },
    check: () => {
      if (existsSync(staging)) return `${staging} is left from an unpack cut short`;
      return hasInit(rootfs) || `${rootfs} has no /sbin/init`;
    },
    // The slot's folder goes with it (rootfs, bundle, console log), and nothing may still run from it.
    destroy: [spec.stopContainer, spec.removeSlot],
    verbs: { create: 'unpack', update: 'unpack' },
  });
}

/**
 * Which tree the rootfs is (its folder's inode): a fresh unpack of the same image is a new tree, without
 * what the slot's tasks wrote into the old one, so its output changes and they run again.
 */
const treeOf = (rootfs: string): number => statSync(rootfs).ino;

function readDigest(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The rootfs has an init (a symlink into itself counts: it is read from inside the container). */
export function hasInit(rootfs: string): boolean {
  try {
    lstatSync(path.join(rootfs, 'sbin/init'));
    return true;
  } catch {
    return false;
  }
}
