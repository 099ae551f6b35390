import { expect, test } from 'vitest';
import { valueChanges } from '../../src/plan/value-diff.ts';

test('changes are found leaf by leaf, keys sorted, paths spelled as a Nodefile would', () => {
  expect(valueChanges({ a: 1, b: { c: [1, 2], 'd-e': 'x' } }, { a: 1, b: { c: [1, 3], 'd-e': 'y' }, f: null })).toEqual([
    { path: 'b.c[1]', from: '2', to: '3' },
    { path: 'b["d-e"]', from: '"x"', to: '"y"' },
    { path: 'f', to: 'null' },
  ]);
});

test('an array that changes length, or a value that changes type, is one change; an equal value none', () => {
  expect(valueChanges({ l: [1] }, { l: [1, 2] })).toEqual([{ path: 'l', from: '[1]', to: '[1,2]' }]);
  expect(valueChanges({ l: { a: 1 } }, { l: 'a' })).toEqual([{ path: 'l', from: '{"a":1}', to: '"a"' }]);
  expect(valueChanges('info', 'debug')).toEqual([{ path: '', from: '"info"', to: '"debug"' }]);
  expect(valueChanges({ b: 2, a: [1, { x: 1 }] }, { a: [1, { x: 1 }], b: 2 })).toEqual([]);
});

test('a text of several lines changes line by line', () => {
  expect(valueChanges({ unit: '[Service]\nTimeoutStopSec=90\nKillMode=mixed' }, { unit: '[Service]\nTimeoutStopSec=30\nKillMode=mixed\n' })).toEqual([
    { path: 'unit line 2', from: '"TimeoutStopSec=90"', to: '"TimeoutStopSec=30"' },
    { path: 'unit line 4', to: '""' },
  ]);
  expect(valueChanges('a\nb', 'a\nc')).toEqual([{ path: 'line 2', from: '"b"', to: '"c"' }]);
});
