// What keeps a no-op nearly free, asserted structurally (nothing here is
// timed: the machines are shared and noisy). A no-op reads no file content,
// stats each file once, parses no state record, writes no state, and loads no
// module it does not use; a change parses the records of what it reaches only.

import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { applyNodefile } from '../../src/apply.ts';
import { observeAndPlan, withSession } from '../../src/engine.ts';
import { execute } from '../../src/execute/scheduler.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import { planNodefile } from '../../src/operations.ts';
import type { ProcessRunner } from '../../src/process-runner.ts';
import { repo, Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const TASKS = 20;
const graph = `
  for (let i = 0; i < ${TASKS}; i++) {
    ng.task('copy/' + i, {
      inputs: { src: ng.file('in/' + i + '.txt'), header: ng.file('in/header.h') },
      outputs: ['out/' + i + '.o'],
      run: ['cp', 'in/' + i + '.txt', 'out/' + i + '.o'],
    });
  }
`;

// A clock a minute ahead: every file written so far is older than the hash
// cache's racy margin (hash/cache.ts), so what a run hashes it keeps.
const later = (): bigint => (BigInt(Date.now()) + 60_000n) * 1_000_000n;

test('a no-op reads no content, stats each input and output file once, decodes no state record, and writes no state', async () => {
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  const nodefile = rig.nodefile(graph);
  const first = await applyNodefile({ nodefile, jobs: 4, now: later });
  if (!first.ok) throw new Error(JSON.stringify(first.error));
  expect(first.value.ran.length).toBe(TASKS);
  expect(first.value.io.recordsDecoded).toBe(0);

  const journal = path.join(rig.dir, '.nodegraph/state.jsonl');
  const cache = path.join(rig.dir, '.nodegraph/hashcache');
  const stamps = (files: string[]): string[] => files.map((f) => statSync(f)).map((s) => `${s.size} ${s.mtimeMs} ${s.ino}`);
  const before = stamps([journal, cache]);
  const noop = await applyNodefile({ nodefile, now: later });
  if (!noop.ok) throw new Error(JSON.stringify(noop.error));
  expect(noop.value.ran).toEqual([]);
  expect(noop.value.io.contentReads).toBe(0);
  // Decided from each record's fixed fields (state/record.ts, the line format).
  expect(noop.value.io.recordsDecoded).toBe(0);
  // Each file once: every task's own input and output, and the header that all of them read.
  expect(noop.value.io.stats).toBe(TASKS * 2 + 1);
  expect(stamps([journal, cache])).toEqual(before);
});

test('one input changed: only the records of the tasks that act are decoded', async () => {
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  const nodefile = rig.nodefile(`${graph}
    const copies = {};
    for (let i = 0; i < ${TASKS}; i++) copies['c' + i] = ng.ref('copy/' + i);
    ng.task('all', { inputs: copies, outputs: ['out/all'], run: { shell: 'cat out/*.o > out/all' } });
  `);
  expect((await applyNodefile({ nodefile, jobs: 4 })).ok).toBe(true);
  rig.write('in/3.txt', 'three\n');
  const one = await applyNodefile({ nodefile });
  if (!one.ok) throw new Error(JSON.stringify(one.error));
  expect(one.value.ran).toEqual(['copy/3', 'all']);
  // copy/3's and all's own: what the others output is known from their records' fixed fields.
  expect(one.value.io.recordsDecoded).toBe(2);
});

test('a tree that several tasks read is walked once per run', async () => {
  for (let i = 0; i < 5; i++) rig.write(`tree/f${i}.txt`, `${i}\n`);
  const nodefile = rig.nodefile(`
    for (let i = 0; i < 3; i++) {
      ng.task('pack/' + i, { inputs: { src: ng.tree('tree') }, outputs: ['out/' + i + '.tar'], run: ['tar', '-cf', 'out/' + i + '.tar', 'tree'] });
    }
  `);
  const first = await applyNodefile({ nodefile, now: later });
  expect(first.ok && first.value.ran.length).toBe(3);
  const noop = await applyNodefile({ nodefile, now: later });
  if (!noop.ok) throw new Error(JSON.stringify(noop.error));
  expect(noop.value.ran).toEqual([]);
  // The folder's stat as the input, its five files once for the tree hash, and the three outputs.
  expect(noop.value.io.stats).toBe(1 + 5 + 3);
});

/**
 * Runs the CLI with a hook that records every module it loads; returns their URLs.
 * Node's own modules it loaded, as process.moduleLoadList names them, go to builtinsLoaded.
 */
async function modulesLoaded(args: string[]): Promise<string[]> {
  const log = rig.path('modules.log');
  rmSync(log, { force: true });
  const hook = rig.write(
    'record-modules.mjs',
    `import { registerHooks } from 'node:module';
import { appendFileSync, writeFileSync } from 'node:fs';
registerHooks({ load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, context); } });
process.on('exit', () => writeFileSync(${JSON.stringify(`${log}.builtins`)}, process.moduleLoadList.join('\\n')));
`,
  );
  const { spawnSync } = await import('node:child_process');
  const result = spawnSync(process.execPath, ['--import', hook, path.join(repo, 'bin/nodegraph.js'), ...args], {
    cwd: rig.dir,
    env: { ...process.env, CI: '1', NO_COLOR: '1' },
    encoding: 'utf8',
  });
  expect(result.status).toBe(0);
  builtinsLoaded = readFileSync(`${log}.builtins`, 'utf8').split('\n');
  return readFileSync(log, 'utf8').trim().split('\n');
}

let builtinsLoaded: string[] = [];

/** Whether the package was loaded: from its own folder, or as the one-file bundle a checkout has (src/nodefile/deps.ts). */
const loadedPackage = (urls: string[], name: string): boolean =>
  urls.some((u) => u.includes(`/node_modules/${name}/`) || u.endsWith(`/node_modules/.nodegraph/deps/${name}.js`));

test('--version loads no engine module and no dependency', async () => {
  const urls = await modulesLoaded(['--version']);
  for (const name of ['zod', 'graphology', 'execa', 'chokidar']) expect(loadedPackage(urls, name)).toBe(false);
  expect(urls.filter((u) => u.includes('/src/')).map((u) => u.slice(u.indexOf('/src/')))).toEqual(['/src/cli/main.ts', '/src/cli/help.ts', '/src/cli/output.ts']);
});

test('a no-op apply loads neither zod, nor graphology, nor execa, nor the terminal view, nor the watcher', async () => {
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  // As a node graph has them: configuration from values, the environment, globs, and checks run as commands.
  rig.nodefile(`${graph}
    ng.task('render', {
      inputs: { settings: ng.value({ mirrors: ['https://m.example'], maxPods: 110, debug: null }), home: ng.env('HOME'), sources: ng.glob('in/*.txt') },
      outputs: ['out/render'],
      run: ['touch', 'out/render'],
      check: ['test', '-f', 'out/render'],
    });
    // A function check that asks a program, as the node kit asks runc and systemctl; after
    // render, whose output it asks about (unordered, its check could run before render's touch).
    ng.task('probe', {
      after: ['render'],
      run: async () => {},
      version: '1',
      check: async (ctx) => (await ctx.exec(['test', '-f', 'out/render'], { reject: false })).exitCode === 0 || 'not rendered',
    });
  `);
  await modulesLoaded(['apply']);
  const urls = await modulesLoaded(['apply']);
  for (const name of ['execa', 'chokidar', 'smol-toml', 'yaml', 'zod', 'graphology', 'diff']) expect(loadedPackage(urls, name)).toBe(false);
  expect(urls.some((u) => u.includes('/src/report/tty.ts') || u.includes('/src/report/json.ts'))).toBe(false);
  // Not node:fs/promises: Node's own glob, which the glob input uses, loads it. node:zlib is the journal's CRC-32.
  expect(builtinsLoaded).toContain('NativeModule fs');
  expect(builtinsLoaded).not.toContain('NativeModule v8');
});

test("a no-op's text goes out without Node's stream classes when stdout and stderr are pipes (cli/output.ts)", async () => {
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  rig.nodefile(graph);
  await modulesLoaded(['apply']);
  await modulesLoaded(['apply']);
  // process.stdout on a pipe is a net.Socket; on a file, a SyncWriteStream.
  expect(builtinsLoaded).not.toContain('NativeModule net');
  expect(builtinsLoaded).not.toContain('NativeModule internal/fs/sync_write_stream');
});

test("the node kit's modules get yaml and smol-toml as one file each (npm ci's prepare bundles them)", async () => {
  // The Nodefile renders YAML and TOML at declaration time, as the node kit does.
  rig.write(
    'Nodefile.ts',
    `import { toYaml } from ${JSON.stringify(path.join(repo, 'src/node/yaml.ts'))};
import { toToml } from ${JSON.stringify(path.join(repo, 'src/node/toml.ts'))};
export default (ng: any) => {
  ng.task('render', { inputs: { y: ng.value(toYaml({ a: [1] })), t: ng.value(toToml({ a: 1 })) }, outputs: ['out'], run: ['touch', 'out'] });
};
`,
  );
  const manifest = path.join(repo, 'node_modules/.nodegraph/deps/manifest.json');
  expect(existsSync(manifest), `${manifest} is missing: npm ci (its prepare script) makes it`).toBe(true);
  const urls = await modulesLoaded(['plan']);
  expect(urls.filter((u) => u.includes('/node_modules/')).map((u) => u.slice(u.indexOf('/node_modules/')))).toEqual([
    '/node_modules/.nodegraph/deps/yaml.js',
    '/node_modules/.nodegraph/deps/smol-toml.js',
  ]);
});


test('a build lets go of what it observed and decided of each task once the task is done', async () => {
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  const nodefile = rig.nodefile(graph);
  const done = await withSession({ nodefile }, { lock: true }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const { plan, selected, observations } = observed.value;
    expect([observations.size, plan.decisions.size]).toEqual([TASKS, TASKS]);
    const summary = await execute({ ...session, selected, observations, records: session.state.records, planned: plan.decisions, keepGoing: false });
    expect(summary.ran).toHaveLength(TASKS);
    expect([observations.size, plan.decisions.size]).toEqual([0, 0]);
    return { ok: true as const, value: undefined };
  });
  expect(done.ok).toBe(true);
});

/** The real runner (spawnd), with what it is asked to read ahead written down in `asked`. */
function readingAheadInto(asked: string[][]): ProcessRunner {
  const real = new LocalRunner();
  return {
    run: (command, options) => real.run(command, options),
    runTask: (command, options) => real.runTask(command, options),
    readAhead: (paths) => (asked.push([...paths]), real.readAhead(paths)),
  };
}

test('a build of a thousand files the hash cache knows nothing of asks the runner to read them ahead, each once; a run whose cache knows them does not', async () => {
  // A hundred tasks of ten files each and the header they share; their bodies are functions, so nothing but the reading is asked of the runner.
  const tasks = 100;
  const width = 10;
  for (let i = 0; i < tasks; i++) for (let j = 0; j < width; j++) rig.write(`in/${i}/${j}.txt`, `${i}.${j}\n`);
  rig.write('in/header.h', 'h\n');
  const nodefile = rig.nodefile(`
    for (let i = 0; i < ${tasks}; i++) {
      const inputs = { header: ng.file('in/header.h') };
      for (let j = 0; j < ${width}; j++) inputs['f' + j] = ng.file('in/' + i + '/' + j + '.txt');
      ng.task('read/' + i, { inputs, outputs: ['out/' + i], run: async (ctx) => { await ctx.writeIfChanged('out/' + i, String(i)); } });
    }
  `);
  const asked: string[][] = [];
  const runner = readingAheadInto(asked);
  const first = await applyNodefile({ nodefile, jobs: 4, runner, now: later });
  expect(first.ok && first.value.ran.length).toBe(tasks);
  // Each file once, the shared header with the first task's, in the order observe reads them.
  const files = (i: number): string[] => [...(i === 0 ? [rig.path('in/header.h')] : []), ...Array.from({ length: width }, (_, j) => rig.path(`in/${i}/${j}.txt`))];
  expect(asked).toEqual([Array.from({ length: tasks }, (_, i) => files(i)).flat()]);
  // Every task runs again (its output is gone), but every input is in the cache now.
  rmSync(rig.path('out'), { recursive: true });
  const second = await applyNodefile({ nodefile, jobs: 4, runner, now: later });
  expect(second.ok && second.value.ran.length).toBe(tasks);
  expect(asked).toHaveLength(1);
});

test("a plan that is only shown reads no input of a task that never ran, nor asks for it to be read ahead, and still names a missing one; a saved plan and an apply read them", async () => {
  const tasks = 300;
  for (let i = 0; i < tasks; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  const nodefile = rig.nodefile(`
    for (let i = 0; i < ${tasks}; i++) {
      ng.task('copy/' + i, { inputs: { src: ng.file('in/' + i + '.txt'), header: ng.file('in/header.h') }, outputs: ['out/' + i], run: ['cp', 'in/' + i + '.txt', 'out/' + i] });
    }
  `);
  const asked: string[][] = [];
  const runner = readingAheadInto(asked);
  const shown = await planNodefile({ nodefile, runner });
  if (!shown.ok) throw new Error(JSON.stringify(shown.error));
  expect(shown.value.plan.counts.create).toBe(tasks);
  expect([shown.value.io.contentReads, shown.value.io.stats, asked.length]).toEqual([0, tasks + 1, 0]);
  // Saved, the plan is bound to every input's hash: each is read, and the many unknown ones read ahead.
  const saved = await planNodefile({ nodefile, runner, out: rig.path('plan.json') });
  if (!saved.ok) throw new Error(JSON.stringify(saved.error));
  expect(saved.value.io.contentReads).toBe(tasks + 1);
  expect(asked).toHaveLength(1);
  expect(saved.value.saved!.observed!['copy/7']!.inputs['src']).toBe(`sha256:${createHash('sha256').update('7\n').digest('hex')}`);
  // A missing input is named all the same.
  rmSync(rig.path('in/7.txt'));
  const missing = await planNodefile({ nodefile, runner });
  expect(missing.ok ? [] : missing.error).toMatchObject([{ reason: 'missing-input', task: 'copy/7', input: 'src' }]);
  rig.write('in/7.txt', '7\n');
  const applied = await applyNodefile({ nodefile, jobs: 4, runner });
  expect(applied.ok && applied.value.ran.length).toBe(tasks);
});

test("observations give out each input's content hash, whether the task has a record (hashes kept as recorded) or not (kept packed until it runs)", async () => {
  const sha = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;
  for (let i = 0; i < TASKS; i++) rig.write(`in/${i}.txt`, `${i}\n`);
  rig.write('in/header.h', 'h\n');
  // One task of ten file inputs (a Map, not a PairMap) and one of a file and a value.
  const wide = `
    ng.task('wide', { inputs: Object.fromEntries(Array.from({ length: 10 }, (_, i) => ['in' + i, ng.file('in/' + i + '.txt')])), outputs: ['out/wide'], run: ['touch', 'out/wide'] });
    ng.task('mixed', { inputs: { a: ng.file('in/1.txt'), v: ng.value(42) }, outputs: ['out/mixed'], run: ['touch', 'out/mixed'] });
  `;
  const nodefile = rig.nodefile(graph + wide);
  // Half the copies have a record, half do not: each kind reads the header the other reads.
  const half = await applyNodefile({ nodefile, jobs: 4, targets: Array.from({ length: TASKS / 2 }, (_, i) => `copy/${2 * i}`) });
  if (!half.ok) throw new Error(JSON.stringify(half.error));
  expect(half.value.ran).toHaveLength(TASKS / 2);
  const checked = await withSession({ nodefile }, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const { observations } = observed.value;
    for (let i = 0; i < TASKS; i++) {
      const inputs = observations.get(`copy/${i}` as never)!.inputs;
      const want = [['src', sha(`${i}\n`)], ['header', sha('h\n')]];
      expect([inputs.get('src'), inputs.get('header')], `copy/${i}`).toEqual([want[0]![1], want[1]![1]]);
      expect([...inputs], `copy/${i}`).toEqual(want);
      expect([...inputs.entries()]).toEqual(want);
      expect([...inputs.values()]).toEqual(want.map(([, h]) => h));
      expect([...inputs.keys()]).toEqual(['src', 'header']);
      const each: string[][] = [];
      inputs.forEach((h, name) => each.push([name, h]));
      expect(each).toEqual(want);
    }
    expect([...observations.get('wide' as never)!.inputs]).toEqual(Array.from({ length: 10 }, (_, i) => [`in${i}`, sha(`${i}\n`)]));
    const mixed = observations.get('mixed' as never)!.inputs;
    expect(mixed.get('a')).toBe(sha('1\n'));
    expect(mixed.get('v')).toMatch(/^sha256:[0-9a-f]{64}$/);
    return { ok: true as const, value: undefined };
  });
  expect(checked.ok).toBe(true);
});
