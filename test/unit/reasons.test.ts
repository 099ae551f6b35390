// The one-line form of a task's reasons that plans, status and the live view print.

import { describe, expect, test } from 'vitest';
import { reasonsLine, REASONS_SHOWN } from '../../src/plan/reasons.ts';

const after = (n: number): string[] => Array.from({ length: n }, (_, i) => `known after cp/${i}`);

describe('reasonsLine', () => {
  test('a few reasons are joined whole, and nothing is appended', () => {
    expect(reasonsLine([])).toBe('');
    expect(reasonsLine(['input src changed 1→2'], '(more)')).toBe('input src changed 1→2');
    expect(reasonsLine(['a', 'b', 'c', 'd'], '(more)')).toBe('a; b; c; d');
  });

  test('consecutive "known after" reasons become one list of ids', () => {
    expect(reasonsLine(after(2))).toBe('known after cp/0, cp/1');
    expect(reasonsLine(['definition changed', ...after(2), 'input x added', ...after(1)])).toBe(
      'definition changed; known after cp/0, cp/1; input x added; known after cp/0',
    );
  });

  test('a long list names the first ones, counts the rest and says where to read them', () => {
    expect(reasonsLine(after(100), '(all: explain)')).toBe('known after cp/0, cp/1, cp/2 and 97 more (all: explain)');
    const changed = Array.from({ length: 10 }, (_, i) => `upstream cp/${i} changed`);
    expect(reasonsLine(changed, '(all: explain)')).toBe('upstream cp/0 changed; upstream cp/1 changed; upstream cp/2 changed; and 7 more (all: explain)');
    expect(reasonsLine(changed)).toBe('upstream cp/0 changed; upstream cp/1 changed; upstream cp/2 changed; and 7 more');
  });

  test('one more than the limit is shown whole, since "and 1 more" would save nothing', () => {
    expect(reasonsLine(after(REASONS_SHOWN + 1), '(more)')).toBe('known after cp/0, cp/1, cp/2, cp/3');
    expect(reasonsLine(after(REASONS_SHOWN + 2), '(more)')).toBe('known after cp/0, cp/1, cp/2 and 2 more (more)');
  });
});
