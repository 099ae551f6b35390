// The watch loop against real file events (chokidar on a temporary folder).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { watchLoop } from '../../src/watch/watcher.ts';

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
