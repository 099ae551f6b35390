import { closeSync, fsyncSync, openSync } from 'node:fs';

/**
 * fsyncs a directory so a rename or a new name in it survives power loss.
 * Some platforms cannot open or fsync a directory; that only weakens
 * durability after a power loss, never consistency, so it is ignored.
 */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // best effort, see above
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
