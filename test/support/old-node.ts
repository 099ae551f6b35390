// A Node.js older than nodegraph supports, from PATH (a system's own node, say), to see what the launcher tells its user.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The first `node` on PATH older than 22.18, or undefined. */
export function oldNode(): { readonly path: string; readonly version: string } | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(':')) {
    const candidate = path.join(dir, 'node');
    if (dir === '' || !existsSync(candidate)) continue;
    try {
      const version = execFileSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      const [major = 0, minor = 0] = version.split('.').map(Number);
      if (major < 22 || (major === 22 && minor < 18)) return { path: candidate, version };
    } catch {
      continue;
    }
  }
  return undefined;
}
