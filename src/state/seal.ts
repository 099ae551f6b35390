// Values kept at rest to be used again, yet unreadable there: an env input's
// value in a generation (transaction/manifest.ts), which `rollback` sets
// again. AES-256-GCM under a key derived by HKDF from the state folder's key
// (state/key.ts), so the cipher never uses the HMAC's bytes; the value's name
// is authenticated with it, so a sealed value cannot be moved to another name.

const { createCipheriv, createDecipheriv, hkdfSync, randomBytes } = process.getBuiltinModule('node:crypto');

/** What a sealed value begins with: the cipher, so another can be told apart later. */
export const SEALED_PREFIX = 'aes-256-gcm:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

const cipherKey = (stateKey: Uint8Array): Buffer => Buffer.from(hkdfSync('sha256', stateKey, '', 'nodegraph sealed values', 32));

/** `value` sealed under `stateKey` for `name`: the prefix, then base64 of IV, tag and ciphertext. */
export function seal(stateKey: Uint8Array, name: string, value: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', cipherKey(stateKey), iv);
  cipher.setAAD(Buffer.from(name, 'utf8'));
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return SEALED_PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** The value `seal` sealed for `name`; undefined when it was sealed under another key or for another name, or is damaged. */
export function unseal(stateKey: Uint8Array, name: string, sealed: string): string | undefined {
  if (!sealed.startsWith(SEALED_PREFIX)) return undefined;
  const bytes = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
  if (bytes.length < IV_BYTES + TAG_BYTES) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', cipherKey(stateKey), bytes.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(name, 'utf8'));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}
