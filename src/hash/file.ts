// Streamed SHA-256 of a file's content.
//
// Sync: one reused 4 MiB buffer, read(2) then hash, chunk by chunk; a file that
// fits in one read is hashed one-shot. Async: two buffers, so the next chunk is
// read on libuv's thread pool while this one is hashed — the reads overlap the
// hashing. OpenSSL's SHA-256 (SHA-NI where the CPU has it) does the hashing.
// bench/hash.ts compares both with `sha256sum`.

import { closeSync, openSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createHash, hash as oneShot } from 'node:crypto';
import { contentHash, type ContentHash } from '../ids.ts';

export interface FileDigest {
  readonly hash: ContentHash;
  /** How many bytes were read (the size of the content hashed). */
  readonly bytes: number;
}

/** Read size; 1 MiB and up all run near the hash's speed, 4 MiB a little ahead. */
export const CHUNK_BYTES = 4 * 1024 * 1024;

let shared: Buffer | undefined;

/** SHA-256 of what can be read from `fd`, from its current position to the end. Does not close it. */
export function sha256FdSync(fd: number): FileDigest {
  // One buffer for every sync call: there is no reentrancy in sync code.
  const buffer = (shared ??= Buffer.allocUnsafeSlow(CHUNK_BYTES));
  const first = readSync(fd, buffer, 0, CHUNK_BYTES, null);
  // A short read from a regular file is its end: hash small files in one shot.
  if (first < CHUNK_BYTES) return { hash: contentHash(oneShot('sha256', buffer.subarray(0, first), 'hex')), bytes: first };
  const digest = createHash('sha256');
  digest.update(buffer);
  let bytes = first;
  for (;;) {
    const n = readSync(fd, buffer, 0, CHUNK_BYTES, null);
    if (n === 0) break;
    digest.update(n === CHUNK_BYTES ? buffer : buffer.subarray(0, n));
    bytes += n;
    if (n < CHUNK_BYTES) break;
  }
  return { hash: contentHash(digest.digest('hex')), bytes };
}

/** SHA-256 of a file's content (following symlinks). Throws the fs error if it cannot be read. */
export function sha256FileSync(file: string): FileDigest {
  const fd = openSync(file, 'r');
  try {
    return sha256FdSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * SHA-256 of a file's content without blocking the event loop on the reads: a
 * multi-gigabyte image should not freeze the rest of the run while it is hashed.
 * (The hashing itself still runs on the main thread, overlapped with the next read.)
 */
export async function sha256FileAsync(file: string): Promise<FileDigest> {
  const handle = await open(file, 'r');
  try {
    let buffer = Buffer.allocUnsafeSlow(CHUNK_BYTES);
    let spare = Buffer.allocUnsafeSlow(CHUNK_BYTES);
    let n = (await handle.read(buffer, 0, CHUNK_BYTES, null)).bytesRead;
    if (n < CHUNK_BYTES) return { hash: contentHash(oneShot('sha256', buffer.subarray(0, n), 'hex')), bytes: n };
    const digest = createHash('sha256');
    let bytes = 0;
    for (;;) {
      // Start the next read into the spare buffer before hashing this chunk.
      const more = n === CHUNK_BYTES;
      const next = more ? handle.read(spare, 0, CHUNK_BYTES, null) : undefined;
      digest.update(more ? buffer : buffer.subarray(0, n));
      bytes += n;
      if (next === undefined) break;
      n = (await next).bytesRead;
      if (n === 0) break;
      [buffer, spare] = [spare, buffer];
    }
    return { hash: contentHash(digest.digest('hex')), bytes };
  } finally {
    await handle.close();
  }
}
