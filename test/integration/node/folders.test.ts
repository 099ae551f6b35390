// The host folder ledger (src/node/folders.ts): what it lists before a folder is made, and its last
// step, the shell script that removes the empty folders nodegraph made and nothing that was there.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FORGET_FOLDERS_SCRIPT, foldersAt, missingChain, parseLedger, renderLedger } from '../../../src/node/folders.ts';
import { describeTree } from '../../support/tree.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-folders-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const ledgerText = (file: string): string[] => readFileSync(file, 'utf8').trim().split('\n').slice(1);

describe('the host folder ledger', () => {
  it('lists each folder it makes, and each parent made on the way, as made; one that was there as found', () => {
    const ledger = path.join(dir, 'var/lib/nodegraph/host-folders');
    mkdirSync(path.join(dir, 'etc'));
    const folders = foldersAt(ledger);
    expect(folders.ensure(path.join(dir, 'etc'))).toBe('found');
    expect(folders.ensure(path.join(dir, 'sys/fs/bpf'))).toBe('made');
    // Made once, made it stays: a later run finds it there.
    expect(folders.ensure(path.join(dir, 'sys/fs/bpf'))).toBe('made');
    expect(ledgerText(ledger)).toEqual([
      `found ${dir}/etc`,
      `made ${dir}/sys`,
      `made ${dir}/sys/fs`,
      `made ${dir}/sys/fs/bpf`,
      `made ${dir}/var`,
      `made ${dir}/var/lib`,
      `made ${dir}/var/lib/nodegraph`,
    ]);
    expect(folders.origin(path.join(dir, 'sys/fs'))).toBe('made');
    expect(folders.origin(path.join(dir, 'opt'))).toBeUndefined();
  });

  it('lists a folder made again after it went as made', () => {
    const folders = foldersAt(path.join(dir, 'ledger/host-folders'));
    mkdirSync(path.join(dir, 'kubelet'));
    expect(folders.ensure(path.join(dir, 'kubelet'))).toBe('found');
    rmSync(path.join(dir, 'kubelet'), { recursive: true });
    expect(folders.ensure(path.join(dir, 'kubelet'))).toBe('made');
  });

  it('reads back what it writes, and refuses a relative or multi-line path', () => {
    const listed = new Map([[`${dir}/b`, 'found' as const], [`${dir}/a b`, 'made' as const]]);
    expect(parseLedger(renderLedger(listed))).toEqual(listed);
    expect(() => missingChain('relative/dir')).toThrow('a host folder must be an absolute path on one line, not "relative/dir"');
    expect(() => missingChain('/tmp/a\nb')).toThrow('a host folder must be an absolute path on one line, not "/tmp/a\\nb"');
  });

  it('forgets: the empty folders it made go, deepest first, then the ledger and its own folders; a found one and a full one stay', () => {
    const root = path.join(dir, 'root');
    mkdirSync(path.join(root, 'etc'), { recursive: true });
    const before = Object.keys(describeTree(root));
    const ledger = path.join(root, 'var/lib/nodegraph/host-folders');
    const folders = foldersAt(ledger);
    for (const d of ['etc', 'etc/modules-load.d', 'run/runc', 'usr/local/libexec/nodegraph', 'opt/cni/bin']) folders.ensure(path.join(root, d));
    writeFileSync(path.join(root, 'opt/cni/bin/bridge'), 'a plugin someone put there\n');
    execFileSync('/bin/sh', ['-c', FORGET_FOLDERS_SCRIPT, 'sh', ledger]);
    expect(existsSync(ledger)).toBe(false);
    expect(Object.keys(describeTree(root))).toEqual([...before, 'opt', 'opt/cni', 'opt/cni/bin', 'opt/cni/bin/bridge'].sort());
    // Again (a destroy cut short is run again): nothing to do.
    execFileSync('/bin/sh', ['-c', FORGET_FOLDERS_SCRIPT, 'sh', ledger]);
  });
});
