import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSources } from '../../scripts/check-imports.ts';
import { breaches, MAX_FILE, MAX_FUNCTION, sizesOf } from '../../scripts/check-size.ts';

const sources = readSources(path.join(import.meta.dirname, '../..'));

/** A function `name` of `lines` lines, written as `head` opens it. */
const fn = (head: string, lines: number): string => [head, ...Array.from({ length: lines - 2 }, (_, i) => `  const x${i} = ${i};`), '}'].join('\n');

describe('the sizes of src/ and graphs/', () => {
  it(`hold: no function over ${MAX_FUNCTION} lines, no file over ${MAX_FILE}`, () => {
    expect(breaches(sources).found).toEqual([]);
  });

  it('fail on a planted long function and a planted long file, naming each and where it starts', () => {
    const planted = new Map([
      ['src/plan/a.ts', `// one line\n${fn('export function plan(): void {', MAX_FUNCTION + 1)}\n`],
      ['src/plan/b.ts', `${fn('export function fits(): void {', MAX_FUNCTION)}\n`],
      ['src/plan/c.ts', `${'// x\n'.repeat(MAX_FILE + 1)}`],
      ['src/plan/d.ts', `${'// x\n'.repeat(MAX_FILE)}`],
    ]);
    expect(breaches(planted, []).found).toEqual([
      `src/plan/a.ts:2: plan: ${MAX_FUNCTION + 1} lines, over ${MAX_FUNCTION}`,
      `src/plan/c.ts: ${MAX_FILE + 1} lines, over ${MAX_FILE}`,
    ]);
  });

  it('names arrows, methods and nested functions by what binds them, and leaves known breaches out', () => {
    const text = [
      'export const outer = memo((a: number): number => {',
      '  const inner = function () {',
      '    return a;',
      '  };',
      '  return inner();',
      '});',
      'class Store {',
      '  get(key: string): string {',
      '    return key;',
      '  }',
      '}',
      'export default () => ({ make: () => 1 });',
      '',
    ].join('\n');
    expect(sizesOf('src/x.ts', text).map((s) => `${s.name || '(file)'}@${s.line}+${s.lines}`)).toEqual([
      '(file)@1+12',
      'outer@1+6',
      'outer > inner@2+3',
      'Store > get@8+3',
      'default@12+1',
      'default > make@12+1',
    ]);
    const long = new Map([['src/plan/a.ts', fn('export function plan(): void {', MAX_FUNCTION + 1)]]);
    expect(breaches(long, ['src/plan/a.ts: plan'])).toEqual({ found: [], stale: [] });
    expect(breaches(new Map(), ['src/plan/a.ts: plan']).stale).toEqual(['src/plan/a.ts: plan']);
  });
});
