// What a removal leaves in place (src/execute/kept.ts): the index of claimed
// outputs answers as a walk over all of them does, for any set of paths.

import fc from 'fast-check';
import { expect, test } from 'vitest';
import { holds } from '../../src/util/paths.ts';
import type { TaskId } from '../../src/ids.ts';
import { Claimed, keptBecause } from '../../src/execute/kept.ts';

// Few names, shallow: paths that share folders, hold and lie in each other.
const segment = fc.constantFrom('a', 'b', 'a.b', 'a-', 'ab', 'é');
const absolute = fc.array(segment, { minLength: 0, maxLength: 4 }).map((parts) => `/${parts.join('/')}`);

test('an output inside a folder, and one a path lies in, are found exactly when a walk over every output finds one', () => {
  fc.assert(
    fc.property(fc.uniqueArray(absolute, { maxLength: 12 }), absolute, (outputs, target) => {
      const owners = new Map(outputs.map((o, i) => [o, `t${i}` as TaskId]));
      const claimed = new Claimed(owners);
      const inside = outputs.filter((o) => o !== target && holds(target, o));
      const around = outputs.filter((o) => o !== target && holds(o, target));
      const foundInside = claimed.inside(target);
      expect(foundInside === undefined).toBe(inside.length === 0);
      if (foundInside !== undefined) {
        expect(inside).toContain(foundInside[0]);
        expect(foundInside[1]).toBe(owners.get(foundInside[0]));
      }
      const foundAround = claimed.around(target);
      expect(foundAround === undefined).toBe(around.length === 0);
      if (foundAround !== undefined) expect(around).toContain(foundAround[0]);
      // And keptBecause says why in those words, the path's own owner first.
      const why = keptBecause(target, undefined, claimed, true);
      if (owners.has(target)) expect(why).toBe(`is now ${owners.get(target)}'s output`);
      else if (inside.length > 0) expect(why).toMatch(/^holds /);
      else if (around.length > 0) expect(why).toMatch(/^lies in /);
      else expect(why).toBeUndefined();
      expect(keptBecause(target, undefined, claimed, false) === undefined).toBe(!owners.has(target) && inside.length === 0);
    }),
    { numRuns: 2000 },
  );
});
