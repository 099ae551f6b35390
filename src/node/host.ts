// The root prefix every host path goes through. A real node uses '/'; tests
// run a whole node inside a temporary folder by giving that folder instead.

import { existsSync } from 'node:fs';
import path from 'node:path';

export interface Host {
  /** The absolute folder that stands for the host's '/'. */
  readonly root: string;
  /** The host path for an absolute node path: `path('/var/lib/kubelet')` → `<root>/var/lib/kubelet`. */
  path(nodePath: string): string;
  exists(nodePath: string): boolean;
  /** True when the host runs systemd as its init (systemd creates /run/systemd/system at boot). */
  hasSystemd(): boolean;
}

export function makeHost(root: string = '/'): Host {
  if (!path.isAbsolute(root)) throw new Error(`the root prefix must be an absolute path, not ${JSON.stringify(root)}`);
  const base = path.resolve(root);
  const toHost = (nodePath: string): string => {
    if (!path.posix.isAbsolute(nodePath)) throw new Error(`a node path must be absolute, not ${JSON.stringify(nodePath)}`);
    // Resolving against '/' first folds any '..' so no path escapes the root.
    const normal = path.posix.resolve('/', nodePath);
    return base === '/' ? normal : normal === '/' ? base : path.join(base, normal);
  };
  return {
    root: base,
    path: toHost,
    exists: (nodePath) => existsSync(toHost(nodePath)),
    hasSystemd: () => existsSync(toHost('/run/systemd/system')),
  };
}
