// What changed inside a value input, key by key, as terraform shows an
// attribute change: pure, from the JSON recorded at the last apply and the
// JSON declared now.

import type { Json } from '../types.ts';
import { canonicalJson } from '../hash/value.ts';
import type { ValueChange } from './reasons.ts';

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const isObject = (v: Json): v is { readonly [key: string]: Json } => typeof v === 'object' && v !== null && !Array.isArray(v);

function join(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  if (identifier.test(key)) return path === '' ? key : `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}

/**
 * Every leaf that differs between `before` and `after`, in key order; objects
 * and arrays of one length are walked, a string of several lines line by line,
 * other values compared whole.
 */
export function valueChanges(before: Json, after: Json, path = ''): ValueChange[] {
  if (isObject(before) && isObject(after)) {
    const changes: ValueChange[] = [];
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    for (const key of keys) {
      const had = Object.hasOwn(before, key) && before[key] !== undefined;
      const has = Object.hasOwn(after, key) && after[key] !== undefined;
      const at = join(path, key);
      if (had && has) changes.push(...valueChanges(before[key]!, after[key]!, at));
      else if (has) changes.push({ path: at, to: canonicalJson(after[key]) });
      else if (had) changes.push({ path: at, from: canonicalJson(before[key]) });
    }
    return changes;
  }
  // A text of several lines (a rendered unit, a config file's content): the lines that differ, as a diff would say them.
  if (typeof before === 'string' && typeof after === 'string' && (before.includes('\n') || after.includes('\n'))) {
    const a = before.split('\n');
    const b = after.split('\n');
    const changes: ValueChange[] = [];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (a[i] === b[i]) continue;
      const at = `${path === '' ? '' : `${path} `}line ${i + 1}`;
      changes.push({ path: at, ...(a[i] === undefined ? {} : { from: JSON.stringify(a[i]) }), ...(b[i] === undefined ? {} : { to: JSON.stringify(b[i]) }) });
    }
    return changes;
  }
  if (Array.isArray(before) && Array.isArray(after) && before.length === after.length) {
    return before.flatMap((item, i) => valueChanges(item, after[i]!, join(path, i)));
  }
  const from = canonicalJson(before);
  const to = canonicalJson(after);
  return from === to ? [] : [{ path, from, to }];
}
