// util/random.ts: the lock's token and temporary names, from /dev/urandom.

import { expect, test } from 'vitest';
import { randomId } from '../../src/util/random.ts';

test('randomId gives distinct version-4 UUIDs', () => {
  const ids = Array.from({ length: 200 }, () => randomId());
  for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(new Set(ids).size).toBe(ids.length);
});
