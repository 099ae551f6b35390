// CRC-32 (zlib's: polynomial 0xEDB88320, reflected) of bytes, for the state
// journal's lines. node:zlib has it natively, but loading node:zlib costs about
// 2-3 ms, and a node's own Nodefile has a state of a few kilobytes. So the
// first bytes a process checks go through this table; node:zlib takes over
// once more than NATIVE_AFTER bytes have been checked. The table, not yet
// optimised by V8, took 1.3-1.7 ms for 16 KiB in 900-byte lines and 1.8-3.7 ms
// for 64 KiB, against 2.9-3.1 ms for loading node:zlib and checking them.
// Both give the same number (test/property/crc32.property.test.ts).

const NATIVE_AFTER = 64 * 1024;

let table: Int32Array | undefined;
let native: ((data: Uint8Array, value?: number) => number) | undefined;
let checked = 0;

/** The CRC-32 of `data`; with `value`, of the bytes whose CRC-32 that was followed by `data`. */
export function crc32(data: Uint8Array, value = 0): number {
  if (native !== undefined) return native(data, value);
  checked += data.length;
  if (checked > NATIVE_AFTER) {
    native = process.getBuiltinModule('node:zlib').crc32;
    return native(data, value);
  }
  return crc32Table(data, value);
}

/** The table-driven crc32 alone (also for the property test). */
export function crc32Table(data: Uint8Array, value = 0): number {
  const t = (table ??= makeTable());
  let c = ~value;
  for (let i = 0; i < data.length; i++) c = t[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

function makeTable(): Int32Array {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
}
