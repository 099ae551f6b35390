// Streamed SHA-256 of a file's content.
//
// Sync: one reused 256 KiB buffer, read(2) then hash, chunk by chunk; a file that
// fits in the buffer is hashed one-shot (no Hash object). A buffer that fits a
// core's L2 cache keeps the kernel's copy warm for the hash: as fast as a
// buffer of megabytes on a quiet machine, faster on a busy one.
// Async: two 1 MiB buffers, the next read (on libuv's thread pool) started
// before this chunk is hashed; buffer size made no difference there.
// OpenSSL's SHA-256 (SHA-NI where the CPU has it) does the hashing.
// bench/hash.ts compares these with `sha256sum`.

import { closeSync, constants, fstatSync, openSync, readSync, type BigIntStats } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { Hash } from 'node:crypto';
import { contentHash, type ContentHash } from '../ids.ts';

const { createHash, hash } = process.getBuiltinModule('node:crypto');

export interface FileDigest {
  readonly hash: ContentHash;
  /** How many bytes were read (the size of the content hashed). */
  readonly bytes: number;
}

/** Buffer of the sync hash (see above). */
export const CHUNK_BYTES = 256 * 1024;
/** Buffers of the async hash. */
export const ASYNC_CHUNK_BYTES = 1024 * 1024;

let shared: Buffer | undefined;

/**
 * Reads into `buffer` until it is full or the file ends; returns the bytes read.
 * (A short read is not taken as the end: FUSE and network filesystems return them.)
 */
function fill(fd: number, buffer: Buffer, max: number): number {
  let filled = 0;
  while (filled < max) {
    const n = readSync(fd, buffer, filled, max - filled, null);
    if (n === 0) break;
    filled += n;
  }
  return filled;
}

async function fillAsync(handle: FileHandle, buffer: Buffer): Promise<number> {
  let filled = 0;
  while (filled < buffer.length) {
    const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, null);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled;
}

/**
 * SHA-256 of what can be read from `fd`, from its current position to the end.
 * Does not close it. With `size` (from a stat just taken), it stops after that many
 * bytes without the read that would confirm the end — one syscall fewer per small
 * file — so the caller must check the size has not changed since (an fstat).
 */
export function sha256FdSync(fd: number, size?: number): FileDigest {
  // One buffer for every sync call: there is no reentrancy in sync code.
  const buffer = (shared ??= Buffer.allocUnsafeSlow(CHUNK_BYTES));
  let digest: Hash | undefined;
  let bytes = 0;
  for (;;) {
    const n = fill(fd, buffer, size === undefined ? CHUNK_BYTES : Math.min(CHUNK_BYTES, size - bytes));
    bytes += n;
    if (n === CHUNK_BYTES && bytes !== size) {
      (digest ??= createHash('sha256')).update(buffer);
      continue;
    }
    // The end. A file that fits in one buffer is hashed in one shot.
    if (digest === undefined) return { hash: contentHash(hash('sha256', buffer.subarray(0, n), 'hex')), bytes };
    digest.update(buffer.subarray(0, n));
    return { hash: contentHash(digest.digest('hex')), bytes };
  }
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
  // node:fs/promises only when it is used: a no-op does not load it.
  const handle = await process.getBuiltinModule('node:fs/promises').open(file, 'r');
  try {
    return await sha256HandleAsync(handle);
  } finally {
    await handle.close();
  }
}

/**
 * SHA-256 of what can be read from an open file, from its current position. Does not close it.
 * On `signal` it throws the signal's reason between two chunks, no read left in flight.
 */
export async function sha256HandleAsync(handle: FileHandle, signal?: AbortSignal): Promise<FileDigest> {
  let buffer = Buffer.allocUnsafeSlow(ASYNC_CHUNK_BYTES);
  let n = await fillAsync(handle, buffer);
  signal?.throwIfAborted();
  if (n < ASYNC_CHUNK_BYTES) return { hash: contentHash(hash('sha256', buffer.subarray(0, n), 'hex')), bytes: n };
  let spare = Buffer.allocUnsafeSlow(ASYNC_CHUNK_BYTES);
  const digest = createHash('sha256');
  let bytes = 0;
  for (;;) {
    // Start filling the spare buffer before hashing this one: the read overlaps the hash.
    const next = n === ASYNC_CHUNK_BYTES ? fillAsync(handle, spare) : undefined;
    digest.update(n === ASYNC_CHUNK_BYTES ? buffer : buffer.subarray(0, n));
    bytes += n;
    if (next === undefined) break;
    n = await next;
    signal?.throwIfAborted();
    [buffer, spare] = [spare, buffer];
  }
  return { hash: contentHash(digest.digest('hex')), bytes };
}

/** A file's content digest, and an fstat of the file read taken after reading it: the stat is of the very file read. */
export interface HashedFile {
  readonly digest: FileDigest;
  readonly after: BigIntStats;
}

/** O_NONBLOCK: if a fifo took the file's place since the stat, open must not wait for a writer. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** Reads `size` bytes of `file`, not up to EOF (a file that grew fails a size check after), and fstats it. */
export function hashAndStat(file: string, size: number): HashedFile {
  const fd = openSync(file, OPEN_FLAGS);
  try {
    const digest = sha256FdSync(fd, size);
    return { digest, after: fstatSync(fd, { bigint: true }) };
  } finally {
    closeSync(fd);
  }
}

/** As hashAndStat, the whole file read off the main thread; given up on `signal` (see sha256HandleAsync). */
export async function hashAndStatAsync(file: string, signal?: AbortSignal): Promise<HashedFile> {
  // node:fs/promises only when a large file needs it: a no-op does not load it.
  const handle = await process.getBuiltinModule('node:fs/promises').open(file, OPEN_FLAGS);
  try {
    const digest = await sha256HandleAsync(handle, signal);
    return { digest, after: await handle.stat({ bigint: true }) };
  } finally {
    await handle.close();
  }
}

/** Errors from opening or reading a path that was a regular file at its stat and is no longer. */
export const changedUnderUs = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ELOOP' || code === 'EAGAIN' || code === 'ENXIO';
};
