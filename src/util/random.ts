// A random UUID (version 4) for the state lock's token and for temporary file
// names, from 16 bytes of /dev/urandom; where that cannot be read, node:crypto's.

import { closeSync, openSync, readSync } from 'node:fs';

export function randomId(): string {
  const bytes = Buffer.alloc(16);
  let read = 0;
  try {
    const fd = openSync('/dev/urandom', 'r');
    try {
      read = readSync(fd, bytes, 0, 16, null);
    } finally {
      closeSync(fd);
    }
  } catch {
    read = 0;
  }
  if (read !== 16) return process.getBuiltinModule('node:crypto').randomUUID();
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // the RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
