// Hashes of values and strings: canonical JSON, length-prefixed parts.
//
// Digests from different functions here are not meant to be compared with one
// another (hashString('x') and hashValue('x') differ); each is stable for its input.

import { contentHash, type ContentHash } from '../ids.ts';

const { hash, createHmac } = process.getBuiltinModule('node:crypto');

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

const keyPath = (path: string, key: string): string =>
  identifier.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * JSON with object keys sorted (by UTF-16 code unit) and no whitespace, so equal
 * values give equal text whatever the order their keys were written in.
 *
 * Accepted: null, booleans, finite numbers, strings, arrays, plain objects (prototype
 * Object.prototype or null) and objects with a toJSON() method (e.g. Date), whose
 * result is canonicalized in turn. An object property whose value is undefined is
 * left out, as JSON.stringify does.
 *
 * Throws a TypeError naming the offending path (`$.a.b[2]`) for: undefined at the top,
 * in an array or returned by toJSON; functions, symbols and bigints anywhere;
 * NaN and ±Infinity; cycles; other objects (Map, Set, class instances, typed arrays),
 * which JSON would silently turn into `{}`.
 */
export function canonicalJson(value: unknown): string {
  const ancestors = new Set<object>();
  // The keys and indices down to the value being written: a path is spelled out only for an error.
  const trail: (string | number)[] = [];
  const where = (): string => {
    let path = '$';
    for (const step of trail) path = typeof step === 'number' ? `${path}[${step}]` : keyPath(path, step);
    return path;
  };
  let out = '';

  const write = (v: unknown): void => {
    switch (typeof v) {
      case 'string':
        out += JSON.stringify(v);
        return;
      case 'boolean':
        out += v ? 'true' : 'false';
        return;
      case 'number':
        if (!Number.isFinite(v)) throw new TypeError(`canonicalJson: ${String(v)} at ${where()} is not a finite number`);
        out += JSON.stringify(v); // -0 becomes 0, as in JSON
        return;
      case 'undefined':
        throw new TypeError(`canonicalJson: undefined at ${where()} has no JSON form`);
      case 'function':
        throw new TypeError(`canonicalJson: a function at ${where()} has no JSON form`);
      case 'symbol':
        throw new TypeError(`canonicalJson: a symbol at ${where()} has no JSON form`);
      case 'bigint':
        throw new TypeError(`canonicalJson: a bigint at ${where()} has no JSON form (convert it to a string)`);
      case 'object':
        break;
    }
    if (v === null) {
      out += 'null';
      return;
    }
    const object = v as object;
    if (ancestors.has(object)) throw new TypeError(`canonicalJson: a cycle at ${where()} (the value contains itself)`);
    if (Array.isArray(object)) {
      ancestors.add(object);
      out += '[';
      for (let i = 0; i < object.length; i++) {
        if (i > 0) out += ',';
        trail.push(i);
        write(object[i]);
        trail.pop();
      }
      out += ']';
      ancestors.delete(object);
      return;
    }
    const toJSON = (object as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') {
      ancestors.add(object);
      write(toJSON.call(object, ''));
      ancestors.delete(object);
      return;
    }
    const proto: unknown = Object.getPrototypeOf(object);
    if (proto !== Object.prototype && proto !== null) {
      const name = (object as { constructor?: { name?: unknown } }).constructor?.name;
      throw new TypeError(
        `canonicalJson: ${typeof name === 'string' && name !== '' ? `a ${name}` : 'an object that is not a plain object'} at ${where()} has no faithful JSON form`,
      );
    }
    ancestors.add(object);
    const record = object as Record<string, unknown>;
    const keys = Object.keys(record);
    if (keys.length > 1) keys.sort(byCodeUnit);
    out += '{';
    let first = true;
    for (const key of keys) {
      const item = record[key];
      if (item === undefined) continue;
      if (!first) out += ',';
      first = false;
      out += JSON.stringify(key) + ':';
      trail.push(key);
      write(item);
      trail.pop();
    }
    out += '}';
    ancestors.delete(object);
  };

  write(value);
  return out;
}

/** SHA-256 of a value's canonical JSON (see canonicalJson for what is accepted). */
export const hashValue = (value: unknown): ContentHash => contentHash(hash('sha256', canonicalJson(value), 'hex'));

/**
 * HMAC-SHA256 under `key` (the state folder's, state/key.ts) of a value's canonical
 * JSON: what a sensitive value or an env input is recorded and shown as. Equal values
 * under one key give equal digests; without the key a digest tests no guess.
 */
export const keyedHash = (key: Uint8Array, value: unknown): ContentHash =>
  contentHash(createHmac('sha256', key).update(canonicalJson(value)).digest('hex'));

/** SHA-256 of a string's UTF-8 bytes (or of bytes): equal to `sha256sum` of a file holding them. */
export const hashString = (text: string | Uint8Array): ContentHash => contentHash(hash('sha256', text, 'hex'));

/**
 * SHA-256 of a list of strings, unambiguously: each part is written as
 * `<length>:<part>\n` (length in UTF-16 code units), so ['ab', 'c'], ['a', 'bc'] and
 * ['abc'] differ, as do lists of different lengths. (UTF-8 encoding turns a lone
 * surrogate into U+FFFD, so a part holding one hashes like the same part with U+FFFD.)
 */
export function hashParts(parts: readonly string[]): ContentHash {
  let text = '';
  for (const part of parts) text += `${part.length}:${part}\n`;
  return contentHash(hash('sha256', text, 'hex'));
}

/**
 * One digest of a task's outputs, as a record and an observation both compute it: of
 * every output's absolute path and hash, sorted by path. The paths count: a project
 * copied elsewhere with its state has the same definitions but other outputs.
 */
export function outputsDigest(outputs: Iterable<readonly [string, string]>): ContentHash {
  const sorted = [...outputs].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const parts: string[] = [];
  for (const [path, hash] of sorted) parts.push(path, hash);
  return hashParts(parts);
}
