// `npm pack` runs this before and after packing: compile src/ to dist/ (Node
// will not strip types below node_modules, so an installed package needs JS),
// then remove dist/ again so a checkout keeps running its sources.

import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
rmSync(path.join(root, 'dist'), { recursive: true, force: true });
if (!process.argv.includes('--clean')) {
  execFileSync(path.join(root, 'node_modules/.bin/tsc'), ['-p', path.join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
}
