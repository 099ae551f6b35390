// SHA-256 (FIPS 180-4) as lowercase hex, of a string (as UTF-8) or bytes.
//
// node:crypto computes it natively, but loading node:crypto takes 7-10 ms
// here (it loads all of its internal modules at once), more than a small
// run's hashing takes in JavaScript: a one-task Nodefile hashes a few hundred
// bytes on a no-op. So the first NATIVE_AFTER bytes a process hashes go
// through the code below, and node:crypto takes over from the call that would
// pass it, as util/crc32.ts does for node:zlib. Not yet optimised by V8, the
// code below took about 2 ms for 4 KiB in 200-byte pieces and 6.5-7 ms for
// 16 KiB, against 7.5-9 ms for loading node:crypto and hashing them. (A hash
// cache of more than 16 KiB, loaded before anything else is hashed, makes a
// larger graph's run native from the start.) Both give the same digest
// (test/property/sha256.property.test.ts).

const NATIVE_AFTER = 16 * 1024;

let native: ((data: string | Uint8Array) => string) | undefined;
let hashed = 0;

export function sha256Hex(data: string | Uint8Array): string {
  if (native !== undefined) return native(data);
  // (A string counts its UTF-16 units: its bytes, if it is ASCII, as definitions are.)
  hashed += data.length;
  // From the call that would pass the mark: a large input is native at once.
  if (hashed > NATIVE_AFTER) {
    const { hash } = process.getBuiltinModule('node:crypto');
    native = (d) => hash('sha256', d, 'hex');
    return native(data);
  }
  return sha256HexJs(data);
}

/** The JavaScript SHA-256 alone (also for the property test). */
export function sha256HexJs(data: string | Uint8Array): string {
  const bytes = typeof data === 'string' ? utf8(data) : data;
  const n = typeof data === 'string' ? encodedLength : data.length;
  const h = H;
  h.set(INITIAL);
  let at = 0;
  for (; at + 64 <= n; at += 64) compress(h, bytes, at);
  // The last block(s): the rest, 0x80, zeros, and the length in bits (big-endian, 64 bits).
  const tail = TAIL;
  tail.fill(0);
  tail.set(bytes.subarray(at, n));
  tail[n - at] = 0x80;
  const blocks = n - at + 9 > 64 ? 2 : 1;
  const end = blocks * 64;
  const high = Math.floor(n / 2 ** 29); // n * 8 / 2 ** 32
  const low = (n * 8) >>> 0;
  for (let i = 0; i < 4; i++) {
    tail[end - 5 - i] = (high >>> (8 * i)) & 0xff;
    tail[end - 1 - i] = (low >>> (8 * i)) & 0xff;
  }
  for (let b = 0; b < blocks; b++) compress(h, tail, b * 64);
  for (let i = 0; i < 8; i++) {
    const word = h[i]!;
    for (let j = 0; j < 4; j++) {
      const byte = (word >>> (24 - 8 * j)) & 0xff;
      HEX_OUT[i * 8 + j * 2] = HEX_DIGITS[byte >>> 4]!;
      HEX_OUT[i * 8 + j * 2 + 1] = HEX_DIGITS[byte & 15]!;
    }
  }
  return HEX_OUT.toString('latin1', 0, 64);
}

const H = new Int32Array(8);
const W = new Int32Array(64);
const TAIL = new Uint8Array(128);
const HEX_OUT = Buffer.alloc(64);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

// The constants: the first 32 bits of the fractional parts of the square roots
// of the first 8 primes, and of the cube roots of the first 64.
const PRIMES: number[] = [];
for (let p = 2; PRIMES.length < 64; p++) if (PRIMES.every((q) => p % q !== 0)) PRIMES.push(p);
const fraction32 = (x: number): number => Math.floor((x - Math.floor(x)) * 2 ** 32) | 0;
const INITIAL = Int32Array.from(PRIMES.slice(0, 8), (p) => fraction32(Math.sqrt(p)));
const K = Int32Array.from(PRIMES, (p) => fraction32(Math.cbrt(p)));

function compress(h: Int32Array, bytes: Uint8Array, at: number): void {
  const w = W;
  for (let i = 0; i < 16; i++) {
    const j = at + i * 4;
    w[i] = (bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) | bytes[j + 3]!;
  }
  for (let i = 16; i < 64; i++) {
    const a = w[i - 15]!;
    const b = w[i - 2]!;
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
  }
  let a = h[0]!;
  let b = h[1]!;
  let c = h[2]!;
  let d = h[3]!;
  let e = h[4]!;
  let f = h[5]!;
  let g = h[6]!;
  let k = h[7]!;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (k + S1 + ch + K[i]! + w[i]!) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    k = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  h[0] = (h[0]! + a) | 0;
  h[1] = (h[1]! + b) | 0;
  h[2] = (h[2]! + c) | 0;
  h[3] = (h[3]! + d) | 0;
  h[4] = (h[4]! + e) | 0;
  h[5] = (h[5]! + f) | 0;
  h[6] = (h[6]! + g) | 0;
  h[7] = (h[7]! + k) | 0;
}

// A string's UTF-8 is written into one buffer, grown as needed (lone surrogates
// become U+FFFD, as node:crypto and Buffer.from encode them).
let scratch = new Uint8Array(4096);
let encodedLength = 0;
const encoder = new TextEncoder();

function utf8(text: string): Uint8Array {
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3);
  encodedLength = encoder.encodeInto(text, scratch).written;
  return scratch;
}
