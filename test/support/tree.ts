// What a folder holds, as a comparable record: each entry's type, mode,
// owner, and SHA-256 (a file) or target (a symlink).

import { createHash } from 'node:crypto';
import { chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import path from 'node:path';

export function describeTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(root)) return out;
  const visit = (p: string, rel: string): void => {
    const st = lstatSync(p);
    const head = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
    if (st.isSymbolicLink()) out[rel] = `link ${head} -> ${readlinkSync(p)}`;
    else if (st.isDirectory()) {
      out[rel] = `dir ${head}`;
      for (const name of readdirSync(p).sort()) visit(path.join(p, name), rel === '' ? name : `${rel}/${name}`);
    } else out[rel] = `file ${head} sha256:${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
  };
  visit(root, '');
  return out;
}

/** A folder with a bit of everything a preserved path can hold: modes, owners, a symlink, a nested folder. */
export function makeSharedTree(root: string): void {
  mkdirSync(path.join(root, 'pki'), { recursive: true });
  writeFileSync(path.join(root, 'kubeconfig'), 'apiVersion: v1\nkind: Config\n');
  chmodSync(path.join(root, 'kubeconfig'), 0o640);
  writeFileSync(path.join(root, 'pki', 'client.pem'), 'identity-1\n');
  chmodSync(path.join(root, 'pki', 'client.pem'), 0o600);
  chownSync(path.join(root, 'pki', 'client.pem'), 1234, 5678);
  chmodSync(path.join(root, 'pki'), 0o700);
  symlinkSync('pki/client.pem', path.join(root, 'current.pem'));
}
