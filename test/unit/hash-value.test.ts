// Canonical JSON and the value/string/parts hashes.

import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { canonicalJson, hashParts, hashString, hashValue } from '../../src/hash/index.ts';

const sha = (s: string): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;

describe('canonicalJson', () => {
  test('sorts keys at every level and drops whitespace', () => {
    const a = { b: 1, a: { d: [1, { z: true, y: null }], c: 'x' } };
    const b = { a: { c: 'x', d: [1, { y: null, z: true }] }, b: 1 };
    expect(canonicalJson(a)).toBe('{"a":{"c":"x","d":[1,{"y":null,"z":true}]},"b":1}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(hashValue(a)).toBe(hashValue(b));
  });

  test('keeps array order and distinguishes values', () => {
    expect(hashValue([1, 2])).not.toBe(hashValue([2, 1]));
    expect(hashValue({ a: '1' })).not.toBe(hashValue({ a: 1 }));
    expect(hashValue(null)).not.toBe(hashValue({}));
  });

  test('is JSON: parses back to the same value, strings escaped', () => {
    const value = { 'k"ey': 'line\nbreak\u2028', n: -0, e: 1e21, s: '\ud800', u: 'é' };
    const text = canonicalJson(value);
    expect(JSON.parse(text)).toEqual({ ...value, n: 0 });
    expect(text).toContain('"n":0');
  });

  test('leaves out undefined properties, as JSON does; uses toJSON; allows shared (acyclic) references', () => {
    expect(canonicalJson({ a: undefined, b: 2 })).toBe('{"b":2}');
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
    const shared = { x: 1 };
    expect(canonicalJson([shared, { y: shared }])).toBe('[{"x":1},{"y":{"x":1}}]');
    expect(canonicalJson(Object.assign(Object.create(null) as object, { b: 1, a: 2 }))).toBe('{"a":2,"b":1}');
  });

  test('hashValue is SHA-256 of the canonical text', () => {
    expect(hashValue({ b: [1], a: 'x' })).toBe(sha('{"a":"x","b":[1]}'));
  });

  const rejects = (value: unknown, message: string): void => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
    expect(() => canonicalJson(value)).toThrow(message);
  };

  test('rejects functions, naming the path', () => {
    rejects({ a: { b: () => 1 } }, 'a function at $.a.b has no JSON form');
  });

  test('rejects undefined in arrays, at the top and holes', () => {
    rejects({ a: { b: [1, 2, undefined] } }, 'undefined at $.a.b[2] has no JSON form');
    rejects(undefined, 'undefined at $ has no JSON form');
    // eslint-disable-next-line no-sparse-arrays
    rejects([1, , 3], 'undefined at $[1]');
  });

  test('rejects non-finite numbers', () => {
    rejects({ x: [0, Number.NaN] }, 'NaN at $.x[1] is not a finite number');
    rejects({ x: Number.POSITIVE_INFINITY }, 'Infinity at $.x is not a finite number');
    rejects({ x: Number.NEGATIVE_INFINITY }, '-Infinity at $.x');
  });

  test('rejects cycles', () => {
    const a: Record<string, unknown> = { list: [] };
    (a.list as unknown[]).push({ back: a });
    rejects(a, 'a cycle at $.list[0].back');
  });

  test('rejects values JSON would mangle: bigint, symbol, Map, Set, class instances', () => {
    rejects({ n: 1n }, 'a bigint at $.n');
    rejects({ s: Symbol('x') }, 'a symbol at $.s');
    rejects({ m: new Map([[1, 2]]) }, 'a Map at $.m has no faithful JSON form');
    rejects([new Set([1])], 'a Set at $[0]');
    class Point {
      x = 1;
    }
    rejects({ p: new Point() }, 'a Point at $.p');
  });

  test('quotes keys that are not identifiers in paths', () => {
    rejects({ 'a b': { 'c.d': [() => 0] } }, 'a function at $["a b"]["c.d"][0]');
  });
});

describe('hashString and hashParts', () => {
  test('hashString is SHA-256 of the UTF-8 bytes', () => {
    expect(hashString('')).toBe('sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hashString('héllo')).toBe(sha('héllo'));
    expect(hashString(Buffer.from('héllo'))).toBe(sha('héllo'));
  });

  test('hashParts is unambiguous', () => {
    const lists = [[], [''], ['', ''], ['abc'], ['ab', 'c'], ['a', 'bc'], ['a', 'b', 'c'], ['1:a'], ['a\n'], ['a', '']];
    const hashes = lists.map((l) => hashParts(l));
    expect(new Set(hashes).size).toBe(lists.length);
    expect(hashParts(['ab', 'c'])).toBe(hashParts(['ab', 'c']));
  });

  test('hashParts keeps its encoding (<length>:<part>\\n), so recorded fingerprints stay valid', () => {
    expect(hashParts(['ab', 'é'])).toBe(sha('2:ab\n1:é\n'));
  });
});
