// A task's definition hash is written out by hand for speed; it must stay the
// canonical JSON of { run, cwd, env, outputs }, or an upgrade would re-run every task.

import fc from 'fast-check';
import path from 'node:path';
import { expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import { taskId } from '../../src/ids.ts';
import { canonicalJson, hashValue } from '../../src/hash/value.ts';
import { Builder } from '../../src/nodefile/builder.ts';
import type { TaskSpec } from '../../src/nodefile/types.ts';
import { definitionOf, definitionText } from '../../src/plan/definition.ts';

const word = fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' });
const segment = fc.stringMatching(/^[a-z0-9_-]{1,8}$/);
const relativePath = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => parts.join('/'));

const specs = fc.record(
  {
    run: fc.oneof(
      fc.array(word, { minLength: 1, maxLength: 4 }),
      word.map((shell) => ({ shell })),
      fc.constant(() => 'done'),
    ),
    version: word,
    cwd: fc.oneof(relativePath, fc.constant('.'), fc.constant('/elsewhere/abs')),
    env: fc.dictionary(fc.stringMatching(/^[A-Z_]{1,6}$/), word, { maxKeys: 4 }),
    outputs: fc.uniqueArray(relativePath, { maxLength: 3 }),
  },
  { requiredKeys: ['run'] },
);

test('the definition text is the canonical JSON of run, cwd, env and outputs', () => {
  fc.assert(
    fc.property(specs, (raw) => {
      const builder = new Builder('/n/Nodefile.ts', '/n');
      builder.api().task('t', raw as TaskSpec);
      const graph = analyze(builder.declarations());
      if (!graph.ok) return; // two outputs where one lies inside another, say: not this test's business
      const node = graph.value.get(taskId('t'))!;
      const spec = node.decl.spec;
      const expected = {
        run: typeof spec.run === 'function' ? { function: spec.version ?? spec.run.toString() } : spec.run,
        cwd: path.relative('/n', node.cwd),
        env: spec.env ?? {},
        outputs: node.outputs.map((o) => path.relative('/n', o)),
      };
      expect(definitionText(node, '/n')).toBe(canonicalJson(expected));
      expect(definitionOf(node, '/n')).toBe(hashValue(expected));
    }),
    { numRuns: 500 },
  );
});
