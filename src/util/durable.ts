// Files that must survive a crash whole: written beside their place, synced,
// renamed over it, and the folder synced, so a reader finds the old content or
// the new, never a mix, even after a power loss.

import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fsyncDir } from './fsync.ts';

/** `mode`: a new file's (0600: the state's files are the owner's alone). */
export function writeDurably(file: string, content: string | Uint8Array, mode = 0o600): void {
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  try {
    const fd = openSync(temp, 'w', mode);
    try {
      const bytes = typeof content === 'string' ? Buffer.from(content) : content;
      for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  fsyncDir(path.dirname(file));
}

/** Syncs a file's content to disk (a copy that must be there after a power loss). */
export function fsyncFile(file: string): void {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
