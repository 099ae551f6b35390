// Hashes of values: canonical JSON (sorted keys, no whitespace) and
// unambiguous lists of strings, all SHA-256 in OCI digest form.

import { hash } from 'node:crypto';
import { contentHash, type ContentHash } from '../ids.ts';

/** JSON with object keys sorted at every level, so equal values hash equal. */
export function canonicalJson(value: unknown): string {
  return encode(value, '$', new Set());
}

function encode(value: unknown, at: string, seen: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`${at}: ${value} is not a JSON number`);
      return JSON.stringify(value);
    case 'object': {
      if (seen.has(value)) throw new TypeError(`${at}: a value cannot contain itself`);
      seen.add(value);
      let text: string;
      if (Array.isArray(value)) {
        text = `[${value.map((v, i) => encode(v, `${at}[${i}]`, seen)).join(',')}]`;
      } else {
        const keys = Object.keys(value).sort();
        const parts: string[] = [];
        for (const key of keys) {
          const v = (value as Record<string, unknown>)[key];
          if (v === undefined) continue; // as JSON.stringify does
          parts.push(`${JSON.stringify(key)}:${encode(v, `${at}.${key}`, seen)}`);
        }
        text = `{${parts.join(',')}}`;
      }
      seen.delete(value);
      return text;
    }
    default:
      throw new TypeError(`${at}: a ${typeof value} is not a JSON value`);
  }
}

export const hashString = (text: string | Uint8Array): ContentHash => contentHash(hash('sha256', text, 'hex'));

export const hashValue = (value: unknown): ContentHash => hashString(canonicalJson(value));

/** A hash of a list of strings in which no two lists collide by concatenation. */
export function hashParts(parts: readonly string[]): ContentHash {
  let text = '';
  for (const part of parts) text += `${part.length}:${part}\n`;
  return hashString(text);
}
