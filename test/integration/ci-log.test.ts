// What `npm test` writes to a log that is not a terminal (CI): no colour
// codes, no warning from the test runner's own transform.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { repo } from '../support/rig.ts';

test('the test script, its output piped, writes plain text and no vite warning', () => {
  const pkg = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // The script as npm runs it, without the type check, on one file of the suite that a dynamic import once made vite warn about.
  const script = pkg.scripts['test']!.replace(/^npm run typecheck && /, '').replace('--project unit --project integration', '--project integration');
  const result = spawnSync('sh', ['-c', `${script} test/integration/state-crash.test.ts -t 'kill -9 while appending'`], {
    cwd: repo,
    env: { ...process.env, PATH: `${path.join(repo, 'node_modules/.bin')}:${path.dirname(process.execPath)}:${process.env['PATH']}`, FORCE_COLOR: undefined, NO_COLOR: undefined, CI: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log = `${result.stdout}${result.stderr}`;
  expect(result.status, log).toBe(0);
  expect(log).toMatch(/Tests {2}1 passed/);
  expect(log).not.toContain('\x1b[');
  expect(log).not.toContain('[vite]');
}, 60_000);
