// Where a project was when a task last ran, and a path put at the same place in
// another folder (src/util/paths.ts): what a move or a copy with its state needs.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { projectThen, rebase } from '../../src/util/paths.ts';

test('the project then: from the task folder then and now, wherever the task runs in it', () => {
  expect(projectThen('/srv/a', '/srv/a', '/srv/a')).toBeUndefined();
  expect(projectThen('/srv/a', '/srv/b', '/srv/b')).toBe('/srv/a');
  expect(projectThen('/srv/a/build', '/opt/b/build', '/opt/b')).toBe('/srv/a');
  // A task that runs at an absolute folder outside the project says nothing of where it was.
  expect(projectThen('/', '/', '/opt/b')).toBeUndefined();
});

test('rebase moves what lies in the folder, and only that', () => {
  expect(rebase('/srv/a/out/x', '/srv/a', '/opt/b')).toBe('/opt/b/out/x');
  expect(rebase('/srv/a', '/srv/a', '/opt/b')).toBe('/opt/b');
  expect(rebase('/srv/ab/x', '/srv/a', '/opt/b')).toBe('/srv/ab/x');
  expect(rebase('/var/lib/x', '/srv/a', '/opt/b')).toBe('/var/lib/x');
});

test('a path put in another folder and back is itself', () => {
  const segment = fc.constantFrom('a', 'b', 'a.b', 'é', 'x y');
  const folder = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => `/${parts.join('/')}`);
  fc.assert(
    fc.property(folder, folder, fc.array(segment, { maxLength: 3 }), (from, to, rest) => {
      const p = [from, ...rest].join('/');
      expect(rebase(rebase(p, from, to), to, from)).toBe(p);
    }),
  );
});
