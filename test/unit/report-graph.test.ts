// `graph` shows every path one way: relative to the Nodefile's folder when under it, whole when not.

import path from 'node:path';
import { expect, test } from 'vitest';
import { shownOutput } from '../../src/cli/graph.ts';

test("an output under the Nodefile's folder is relative to it; one elsewhere is whole, never ../../", () => {
  const dir = '/srv/project';
  expect(shownOutput(dir, '/srv/project/out/a.txt')).toBe(path.join('out', 'a.txt'));
  expect(shownOutput(dir, '/var/lib/kubelet/config.yaml')).toBe('/var/lib/kubelet/config.yaml');
  expect(shownOutput(dir, '/srv/other/x')).toBe('/srv/other/x');
  expect(shownOutput(dir, '/srv/project')).toBe('/srv/project');
  expect(shownOutput(dir, '/srv/project/..x/y')).toBe(path.join('..x', 'y'));
});
