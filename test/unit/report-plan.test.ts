// The plan as a person reads it on a terminal: reasons wrapped under their own column at its width, values too long
// for the line pointed at `explain`, and a legend of the symbols the plan uses.

import { expect, test } from 'vitest';
import { taskId } from '../../src/ids.ts';
import { listedPlan, type PlanEntry } from '../../src/plan/plan.ts';
import { palette } from '../../src/report/color.ts';
import { PLAN_CHUNK, renderPlan, writePlan } from '../../src/report/plan-view.ts';
import { reasonText, VALUE_SHOWN } from '../../src/plan/reasons.ts';

const entry = (id: string, action: PlanEntry['action'], verb: string, reasons: string[]) => ({ id: taskId(id), action, verb, reasons });

test('at the terminal width the reasons wrap under their column, a hanging indent; through a pipe an entry is one line', () => {
  const reasons = ['input settings changed: logLevel: "info" → "debug"', 'upstream kube1/etcd changed aaaa→bbbb'];
  const plan = listedPlan([entry('kube1/api', 'update', 'update', reasons), entry('web', 'create', 'create', ['never ran'])]);
  expect(renderPlan(plan, palette(false), { width: 60 })).toBe(
    [
      '  ~ kube1/api  update  input settings changed: logLevel:',
      '                       "info" → "debug"; upstream kube1/etcd',
      '                       changed aaaa→bbbb',
      '  + web        create  never ran',
      'Plan: 1 to create, 1 to update, 0 to destroy; 0 unchanged.',
      '+ create  ~ update',
    ].join('\n'),
  );
  expect(renderPlan(plan, palette(false)).split('\n')[0]).toBe(`  ~ kube1/api  update  ${reasons.join('; ')}`);
});

test('a word wider than a line (a long value) is cut across lines, nothing lost; a head too wide starts the reasons below it', () => {
  const long = `"${'x'.repeat(70)}"`;
  const plan = listedPlan([entry(`${'n'.repeat(50)}`, 'update', 'restart', [`input v changed: ${long}`])]);
  const text = renderPlan(plan, palette(false), { width: 40 });
  const lines = text.split('\n');
  expect(lines[0]).toBe(`  R ${'n'.repeat(50)}  restart`);
  expect(lines.slice(1, -2).every((l) => l.startsWith('      ') && l.length <= 40)).toBe(true);
  expect(lines.slice(1, -2).map((l) => l.slice(6)).join(' ')).toBe(`input v changed: ${long}`.replace(long, `${long.slice(0, 34)} ${long.slice(34, 68)} ${long.slice(68)}`));
  expect(lines.at(-1)).toBe('R restart');
});

test('a value cut in the prose, or changes counted, point at explain; only the symbols that appear are in the legend', () => {
  const plan = listedPlan([
    entry('conf', 'update', 'update', ['input settings changed: big: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…" → 1']),
    entry('keys', 'update', 'update', ['input k changed: a: 1 → 2, b: 1 → 2, c: 1 → 2 and 2 more']),
    entry('gone', 'destroy', 'destroy', ['no longer declared']),
    entry('pod', 'maybe', 'may restart', ['known after conf']),
  ]);
  const lines = renderPlan(plan, palette(false)).split('\n');
  expect(lines[0]).toBe('  ~ conf  update       input settings changed: big: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…" → 1 (all: nodegraph explain conf)');
  expect(lines[1]).toBe('  ~ keys  update       input k changed: a: 1 → 2, b: 1 → 2, c: 1 → 2 and 2 more (all: nodegraph explain keys)');
  expect(lines[3]).toBe('  ? pod   may restart  known after conf');
  expect(lines.at(-1)).toBe('~ update  ? known after apply  - destroy');
});

test('a changed value is shown whole, wrapped under its column; only one longer than VALUE_SHOWN is cut, with a pointer to explain', () => {
  const url = (v: string): string => JSON.stringify(`https://registry.example.com/some/very/long/path/to/an/artifact-${v}.tar.gz`);
  const change = reasonText({ kind: 'input-changed', input: 's', from: '', to: '', changes: [{ path: 'url', from: url('1.2.3'), to: url('1.2.4') }] });
  expect(renderPlan(listedPlan([entry('conf', 'update', 'update', [change])]), palette(false), { width: 80 }).split('\n').slice(0, 6)).toEqual([
    '  ~ conf  update  input s changed: url:',
    '                  "https://registry.example.com/some/very/long/path/to/an/artifa',
    '                  ct-1.2.3.tar.gz" →',
    '                  "https://registry.example.com/some/very/long/path/to/an/artifa',
    '                  ct-1.2.4.tar.gz"',
    'Plan: 0 to create, 1 to update, 0 to destroy; 0 unchanged.',
  ]);
  const huge = JSON.stringify('x'.repeat(VALUE_SHOWN));
  const cut = reasonText({ kind: 'input-changed', input: 's', from: '', to: '', changes: [{ path: 'k', from: huge, to: '1' }] });
  expect(cut).toBe(`input s changed: k: ${huge.slice(0, VALUE_SHOWN - 1)}… → 1`);
  expect(renderPlan(listedPlan([entry('conf', 'update', 'update', [cut])]), palette(false)).split('\n')[0]).toBe(`  ~ conf  update  ${cut} (all: nodegraph explain conf)`);
  // explain shows it whole.
  expect(reasonText({ kind: 'input-changed', input: 's', from: '', to: '', changes: [{ path: 'k', from: huge, to: '1' }] }, true)).toBe(`input s changed: k: ${huge} → 1`);
});

test('a long plan is written in pieces of about PLAN_CHUNK, never whole: their text is the rendered plan', () => {
  const plan = listedPlan(Array.from({ length: 5000 }, (_, i) => entry(`t/${i}`, 'create', 'create', ['never ran'])));
  const pieces: string[] = [];
  writePlan(plan, palette(false), (text) => pieces.push(text));
  const longestLine = '  + t/4999  create  never ran\n'.length;
  expect(Math.max(...pieces.map((p) => p.length))).toBeLessThan(PLAN_CHUNK + longestLine);
  expect(pieces.length).toBeGreaterThan(1);
  expect(pieces.join('')).toBe(`${renderPlan(plan, palette(false))}\n`);
});
