import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { renderFile } from '../../../src/node/render.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-render-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('renderFile', () => {
  it('creates, leaves alone, and updates', () => {
    const file = path.join(dir, 'a/b/config.toml');
    expect(renderFile(file, 'x = 1\n')).toBe('created');
    const before = statSync(file).mtimeMs;
    expect(renderFile(file, 'x = 1\n')).toBe('unchanged');
    expect(statSync(file).mtimeMs).toBe(before);
    expect(renderFile(file, 'x = 2\n')).toBe('updated');
    expect(readFileSync(file, 'utf8')).toBe('x = 2\n');
  });

  it('sets the mode whatever the umask, and fixes a changed mode', () => {
    const file = path.join(dir, 'token');
    renderFile(file, 'secret', { mode: 0o600 });
    expect(statSync(file).mode & 0o7777).toBe(0o600);
    chmodSync(file, 0o644);
    expect(renderFile(file, 'secret', { mode: 0o600 })).toBe('updated');
    expect(statSync(file).mode & 0o7777).toBe(0o600);
    renderFile(path.join(dir, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
    expect(statSync(path.join(dir, 'tool')).mode & 0o7777).toBe(0o755);
  });

  it('sets the owner when asked', () => {
    const file = path.join(dir, 'owned');
    const uid = process.getuid!();
    const gid = process.getgid!();
    expect(renderFile(file, 'x', { owner: { uid, gid } })).toBe('created');
    expect(renderFile(file, 'x', { owner: { uid, gid } })).toBe('unchanged');
    if (uid === 0) {
      expect(renderFile(file, 'x', { owner: { uid: 1234, gid: 4321 } })).toBe('updated');
      expect(statSync(file)).toMatchObject({ uid: 1234, gid: 4321 });
    }
  });

  it('leaves no temporary file behind and replaces atomically', () => {
    const file = path.join(dir, 'f');
    writeFileSync(file, 'old');
    renderFile(file, 'new');
    expect(readFileSync(file, 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['f']);
  });
});
