// collectGarbage (src/util/gc.ts) really collects: what was dropped is gone
// from the heap right after the call, not at the collector's next chance.

import { expect, test } from 'vitest';
import { collectGarbage } from '../../src/util/gc.ts';

test('collectGarbage frees what is no longer reachable', () => {
  let held: string[][] | undefined = Array.from({ length: 200 }, (_, i) => Array.from({ length: 1000 }, (_, j) => `${i}:${j}:${'x'.repeat(200)}`));
  collectGarbage();
  const withIt = process.memoryUsage().heapUsed;
  expect(held.length).toBe(200);
  held = undefined;
  collectGarbage();
  const without = process.memoryUsage().heapUsed;
  // 200,000 strings of about 210 characters: over 40 MB.
  expect(withIt - without).toBeGreaterThan(30 * 2 ** 20);
  expect(held).toBeUndefined();
});

test('collectGarbage with compact gives back the pages what died was in, where a plain collection keeps them', () => {
  // One string in ten lives on, in every page: nothing is freed page by page.
  let held: string[][] | undefined = Array.from({ length: 200 }, (_, i) => Array.from({ length: 1000 }, (_, j) => `${i}:${j}:${'x'.repeat(200)}`));
  collectGarbage();
  const kept = held.map((strings) => strings.filter((_, j) => j % 10 === 0));
  held = undefined;
  collectGarbage({ compact: true });
  const { heapTotal, heapUsed } = process.memoryUsage();
  expect(kept.length).toBe(200);
  // About 4 MB lives; without compacting, over 40 MB stays mapped for it.
  expect(heapTotal - heapUsed).toBeLessThan(20 * 2 ** 20);
});
