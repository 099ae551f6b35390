import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSources, violations } from '../../scripts/check-imports.ts';

const sources = readSources(path.join(import.meta.dirname, '../..'));

/** The sources with `text` added at the top of `file` (a new file when there is none). */
const planted = (file: string, text: string): Map<string, string> => new Map([...sources, [file, `${text}\n${sources.get(file) ?? ''}`]]);

describe('the import graph', () => {
  it('points one way: every import goes to its own folder or a lower layer, and no files import each other', () => {
    expect(violations(sources).found).toEqual([]);
  });

  it('fails on a planted violation of each kind, naming the import and the rule', () => {
    expect(violations(planted('src/plan/decide.ts', "import { watchLoop } from '../watch/watcher.ts';")).found).toEqual([
      'src/plan/decide.ts -> src/watch/watcher.ts: plan may not import watch',
    ]);
    expect(violations(planted('src/plan/plan.ts', "import { openJournal } from '../state/journal.ts';")).found).toEqual([
      'src/plan/plan.ts -> src/state/journal.ts: plan takes only types from state',
    ]);
    expect(violations(planted('src/error.ts', "import type { TaskSpec } from './nodefile/types.ts';")).found).toEqual([
      'src/error.ts -> src/nodefile/types.ts: kernel may not import nodefile',
    ]);
    expect(violations(planted('src/execute/action.ts', "import { loadNodefile } from '../nodefile/load.ts';")).found).toEqual([
      'src/execute/action.ts -> src/nodefile/load.ts: execute takes only types from nodefile',
    ]);
    expect(violations(planted('src/state/record.ts', "import type { TaskSpec } from '../nodefile/types.ts';")).found).toEqual([
      'src/state/record.ts -> src/nodefile/types.ts: state takes nothing from nodefile',
    ]);
    expect(violations(planted('src/plan/reasons.ts', "import { bundleConfig } from '../node/bundle.ts';")).found).toEqual([
      'src/plan/reasons.ts -> src/node/bundle.ts: only graphs/ import the node kit',
    ]);
    expect(violations(planted('graphs/node-config.ts', "import { apply } from '../src/apply.ts';")).found).toEqual([
      'graphs/node-config.ts -> src/apply.ts: a graph imports the node kit and the Nodefile API only',
    ]);
    expect(violations(planted('src/widgets/a.ts', '')).found).toEqual(['src/widgets/a.ts: in no layer']);
  });

  it('finds a loop, through types too', () => {
    const loop = planted('src/cli/plan.ts', "import type { main } from './main.ts';");
    expect(violations(loop).found).toEqual([expect.stringMatching(/^loop among src\/cli\/main\.ts, src\/cli\/plan\.ts$/)]);
  });

  it('reads static, re-exported and dynamic imports, and not one quoted in a comment', () => {
    const files = new Map([
      ['src/plan/a.ts', "// import { x } from '../execute/b.ts';\n/* export * from '../run.ts' */\nexport { y } from '../execute/c.ts';\nconst z = await import('../execute/d.ts');\ntype T = import('../execute/e.ts').T;"],
    ]);
    expect(violations(files, []).found).toEqual([
      'src/plan/a.ts -> src/execute/c.ts: plan may not import execute',
      'src/plan/a.ts -> src/execute/d.ts: plan may not import execute',
      'src/plan/a.ts -> src/execute/e.ts: plan may not import execute',
    ]);
  });
});
