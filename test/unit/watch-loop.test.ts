// The watch loop against real file events (chokidar on a temporary folder).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { analyze } from '../../src/graph/analyze.ts';
import { Builder } from '../../src/nodefile/builder.ts';
import { watchFilter, watchLoop } from '../../src/watch/watcher.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodegraph-watch-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('says it is idle only once its watches are armed: a change made at that moment starts a run', async () => {
  const file = join(dir, 'input.txt');
  writeFileSync(file, 'one\n');
  const controller = new AbortController();
  let runs = 0;
  let wrote = false;
  const states: string[] = [];
  await watchLoop({
    debounceMs: 10,
    signal: controller.signal,
    runOnce: async () => {
      if (++runs === 2) controller.abort();
      return undefined; // as if the Nodefile did not load: the fallback paths are watched
    },
    fallbackPaths: [file],
    onState: (state) => {
      states.push(state);
      // "watching for changes" is printed here; a user may save a file the next moment.
      if (state === 'idle' && !wrote) {
        wrote = true;
        writeFileSync(file, 'two\n');
      }
    },
  });
  expect(runs).toBe(2);
  expect(states.slice(0, 4)).toEqual(['running', 'idle', 'debouncing', 'running']);
}, 15_000);

test('a change during a run queues one more, which says which file changed', async () => {
  const file = join(dir, 'input.txt');
  writeFileSync(file, 'one\n');
  const controller = new AbortController();
  const states: [string, string | undefined][] = [];
  let runs = 0;
  await watchLoop({
    debounceMs: 10,
    signal: controller.signal,
    runOnce: async () => {
      runs++;
      if (runs === 2) {
        // A save while this run goes on: the loop queues one more run.
        writeFileSync(file, 'two\n');
        while (!states.some(([s]) => s === 'queued')) await new Promise((r) => setTimeout(r, 5));
      }
      if (runs === 3) controller.abort();
      return undefined;
    },
    fallbackPaths: [file],
    onState: (state, why) => {
      states.push([state, why]);
      if (state === 'idle' && runs === 1) writeFileSync(file, 'start\n');
    },
  });
  expect(runs).toBe(3);
  expect(states.filter(([s]) => s === 'debouncing').at(-1)).toEqual(['debouncing', `${file} (changed during the run)`]);
}, 15_000);

test("what the evaluation read counts as it was read: a file's every change, a probe's and a listing's appearing and going; never what the tasks write", () => {
  const builder = new Builder('/n/Nodefile.ts', '/n');
  builder.api().task('render', { outputs: ['/n/out/config', '/n/conf.d/generated'], run: ['true'] });
  const graph = analyze(builder.declarations());
  if (!graph.ok) throw new Error(JSON.stringify(graph.error));
  const counts = watchFilter(graph.value, [], '/n/.nodegraph', {
    files: new Map([
      ['/n/settings.json', 'a'],
      ['/n/out/config', 'b'],
    ]),
    probes: [
      { path: '/n/local.json', kind: 'absent' },
      { path: '/n/conf.d', kind: 'dir', entries: ['a.conf'] },
    ],
  });
  expect(counts('/n/settings.json', 'change')).toBe(true);
  expect(counts('/n/out/config', 'change')).toBe(false);
  expect(counts('/n/local.json', 'add')).toBe(true);
  expect(counts('/n/local.json', 'change')).toBe(false);
  expect(counts('/n/conf.d/b.conf', 'add')).toBe(true);
  expect(counts('/n/conf.d/a.conf', 'unlink')).toBe(true);
  expect(counts('/n/conf.d/a.conf', 'change')).toBe(false);
  expect(counts('/n/conf.d/generated', 'add')).toBe(false);
  expect(counts('/n/conf.d/sub/deeper', 'add')).toBe(false);
  expect(counts('/n/watch.log', 'add')).toBe(false);
});
