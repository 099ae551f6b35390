import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { applyWhiteouts, imageDigest, memberPath, sha256File, unpackImage } from '../../../src/node/archive.ts';
import { realExec } from '../../support/exec.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-archive-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Writes files (path → content; content null makes a directory) below a fresh folder. */
function tree(name: string, files: Record<string, string | null>): string {
  const root = path.join(dir, name);
  mkdirSync(root, { recursive: true });
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(root, rel);
    if (content === null) mkdirSync(p, { recursive: true });
    else {
      mkdirSync(path.dirname(p), { recursive: true });
      writeFileSync(p, content);
    }
  }
  return root;
}

/** Every file and directory below root, as sorted relative paths (directories end in /). */
function list(root: string, rel = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const p = rel === '' ? entry.name : `${rel}/${entry.name}`;
    if (entry.isDirectory()) out.push(`${p}/`, ...list(root, p));
    else out.push(p);
  }
  return out.sort();
}

const sha = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

describe('image archive to rootfs', () => {
  for (const [name, flag] of [['gzip', '--gzip'], ['xz', '--xz'], ['zstd', '--zstd'], ['plain', '']] as const) {
    it(`unpacks a ${name} archive without being told the compression`, async () => {
      const src = tree('src', { 'sbin/init': '#!/bin/sh\n', 'etc/hostname': 'node\n', 'var/empty': null });
      const archive = path.join(dir, `image.tar.${name}`);
      execFileSync('tar', ['--create', ...(flag === '' ? [] : [flag]), `--file=${archive}`, `--directory=${src}`, '.']);
      const rootfs = path.join(dir, 'slot/rootfs');
      const result = await unpackImage(realExec(), archive, rootfs);
      expect(result).toEqual({ kind: 'archive', digest: `sha256:${sha(readFileSync(archive))}` });
      expect(list(rootfs)).toEqual(['etc/', 'etc/hostname', 'sbin/', 'sbin/init', 'var/', 'var/empty/']);
      expect(await imageDigest(archive)).toBe(result.digest);
    });
  }

  it('replaces the rootfs whole and leaves no staging folder', async () => {
    const rootfs = path.join(dir, 'slot/rootfs');
    const one = path.join(dir, 'one.tar.gz');
    const two = path.join(dir, 'two.tar.gz');
    execFileSync('tar', ['-czf', one, '-C', tree('one', { 'old-only': 'x', 'etc/v': '1' }), '.']);
    execFileSync('tar', ['-czf', two, '-C', tree('two', { 'etc/v': '2' }), '.']);
    await unpackImage(realExec(), one, rootfs);
    writeFileSync(path.join(rootfs, 'written-later'), 'y');
    await unpackImage(realExec(), two, rootfs);
    expect(list(rootfs)).toEqual(['etc/', 'etc/v']);
    expect(readFileSync(path.join(rootfs, 'etc/v'), 'utf8')).toBe('2');
    expect(readdirSync(path.join(dir, 'slot'))).toEqual(['rootfs']);
  });

  it('leaves the replaced rootfs aside when asked, for a container still running on it', async () => {
    const rootfs = path.join(dir, 'slot/rootfs');
    const one = path.join(dir, 'one.tar');
    const two = path.join(dir, 'two.tar');
    execFileSync('tar', ['-cf', one, '-C', tree('one', { v: '1' }), '.']);
    execFileSync('tar', ['-cf', two, '-C', tree('two', { v: '2' }), '.']);
    expect((await unpackImage(realExec(), one, rootfs, { keepOld: true })).old).toBeUndefined();
    const second = await unpackImage(realExec(), two, rootfs, { keepOld: true });
    expect(second.old).toBe(`${rootfs}.old`);
    expect(readFileSync(path.join(rootfs, 'v'), 'utf8')).toBe('2');
    expect(readFileSync(path.join(`${rootfs}.old`, 'v'), 'utf8')).toBe('1');
    // The next unpack clears what an earlier one left.
    await unpackImage(realExec(), one, rootfs);
    expect(readdirSync(path.join(dir, 'slot'))).toEqual(['rootfs']);
  });

  it('keeps the old rootfs when the image lacks what the node boots, or is a folder but no OCI layout', async () => {
    const rootfs = path.join(dir, 'slot/rootfs');
    const good = path.join(dir, 'good.tar');
    execFileSync('tar', ['-cf', good, '-C', tree('good', { 'sbin/init': '#!/bin/sh' }), '.']);
    await unpackImage(realExec(), good, rootfs, { mustHave: 'sbin/init' });
    const empty = path.join(dir, 'empty.tar');
    execFileSync('tar', ['-cf', empty, '-C', tree('empty', { 'etc/hostname': 'x' }), '.']);
    await expect(unpackImage(realExec(), empty, rootfs, { mustHave: 'sbin/init' })).rejects.toThrow(
      `image ${empty} has no /sbin/init: it is not an image the node can boot; ${rootfs} is left as it was`,
    );
    const folder = tree('unpacked', { 'sbin/init': '#!/bin/sh' });
    await expect(unpackImage(realExec(), folder, rootfs, { mustHave: 'sbin/init' })).rejects.toThrow(
      `image ${folder} is a folder but not an OCI image layout (no oci-layout and index.json in it): give a tar archive or an OCI image layout`,
    );
    expect(list(rootfs)).toEqual(['sbin/', 'sbin/init']);
    expect(readdirSync(path.join(dir, 'slot'))).toEqual(['rootfs']);
  });

  it('keeps the old rootfs when an archive cannot be unpacked', async () => {
    const rootfs = path.join(dir, 'slot/rootfs');
    const good = path.join(dir, 'good.tar');
    execFileSync('tar', ['-cf', good, '-C', tree('good', { keep: 'me' }), '.']);
    await unpackImage(realExec(), good, rootfs);
    const bad = path.join(dir, 'bad.tar.gz');
    writeFileSync(bad, 'this is not an archive');
    await expect(unpackImage(realExec(), bad, rootfs)).rejects.toThrow(`could not unpack ${bad}: tar: This does not look like a tar archive`);
    expect(list(rootfs)).toEqual(['keep']);
    expect(readdirSync(path.join(dir, 'slot'))).toEqual(['rootfs']);
  });
});

describe('OCI image layout', () => {
  /** Builds a layout whose layers are the given trees, in order; returns its folder and manifest digest. */
  function layout(layers: string[], options: { corrupt?: boolean; nested?: boolean } = {}): { dir: string; manifest: string } {
    const out = path.join(dir, 'layout');
    const blobs = path.join(out, 'blobs/sha256');
    mkdirSync(blobs, { recursive: true });
    const put = (bytes: Buffer): { digest: string; size: number } => {
      const hex = sha(bytes);
      writeFileSync(path.join(blobs, hex), bytes);
      return { digest: `sha256:${hex}`, size: bytes.length };
    };
    const descriptors = layers.map((layerDir, i) => {
      const file = path.join(dir, `layer${i}.tar.gz`);
      execFileSync('tar', ['-czf', file, '-C', layerDir, '.']);
      return { mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', ...put(readFileSync(file)) };
    });
    const config = put(Buffer.from('{}'));
    const manifest = put(
      Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config }, layers: descriptors })),
    );
    if (options.corrupt) writeFileSync(path.join(blobs, descriptors[0]!.digest.slice(7)), 'tampered');
    let top = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifest, platform: { os: 'linux', architecture: 'amd64' } };
    if (options.nested) {
      const other = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...manifest, platform: { os: 'linux', architecture: 's390x' } };
      const index = put(Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [other, top] })));
      top = { mediaType: 'application/vnd.oci.image.index.v1+json', ...index, platform: undefined as never };
    }
    writeFileSync(path.join(out, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
    writeFileSync(path.join(out, 'index.json'), JSON.stringify({ schemaVersion: 2, manifests: [top] }));
    return { dir: out, manifest: manifest.digest };
  }

  it('unpacks layers in order, honouring whiteouts and opaque directories', async () => {
    const lower = tree('l1', {
      'a/file1': '1',
      'a/file2': '2',
      'b/keep': 'k',
      'd/x': 'x',
      'd/sub/deep': 'deep',
      'gone/inside': 'i',
      'replaced/old': 'o',
    });
    const upper = tree('l2', {
      'a/.wh.file1': '',
      'd/.wh..wh..opq': '',
      'd/y': 'y',
      '.wh.gone': '',
      // A whiteout and a new entry of the same name: the lower one goes, this layer's stays.
      '.wh.replaced': '',
      'replaced/new': 'n',
      'c/new': 'c',
      'b/keep': 'k2',
    });
    const { dir: oci, manifest } = layout([lower, upper]);
    const rootfs = path.join(dir, 'rootfs');
    const result = await unpackImage(realExec(), oci, rootfs, { platform: { os: 'linux', architecture: 'amd64' } });
    expect(result).toEqual({ kind: 'oci-layout', digest: manifest });
    expect(list(rootfs)).toEqual(['a/', 'a/file2', 'b/', 'b/keep', 'c/', 'c/new', 'd/', 'd/y', 'replaced/', 'replaced/new']);
    expect(readFileSync(path.join(rootfs, 'b/keep'), 'utf8')).toBe('k2');
  });

  it('follows an image index to this platform’s manifest', async () => {
    const { dir: oci, manifest } = layout([tree('only', { 'sbin/init': 'i' })], { nested: true });
    const result = await unpackImage(realExec(), oci, path.join(dir, 'rootfs'), { platform: { os: 'linux', architecture: 'amd64' } });
    expect(result.digest).toBe(manifest);
    expect(await imageDigest(oci, { platform: { os: 'linux', architecture: 'amd64' } })).toBe(manifest);
  });

  it('refuses a layer whose content does not match its digest', async () => {
    const { dir: oci } = layout([tree('only', { f: 'x' })], { corrupt: true });
    await expect(unpackImage(realExec(), oci, path.join(dir, 'rootfs'))).rejects.toThrow(/does not match its content/);
    expect(existsSync(path.join(dir, 'rootfs'))).toBe(false);
    expect(existsSync(path.join(dir, 'rootfs.new'))).toBe(false);
  });

  it('names the index.json that is not JSON (a copy cut short)', async () => {
    const { dir: oci } = layout([tree('only', { 'sbin/init': 'i' })]);
    writeFileSync(path.join(oci, 'index.json'), '{"schemaVersion": 2, "manif');
    await expect(unpackImage(realExec(), oci, path.join(dir, 'rootfs'))).rejects.toThrow(`${oci}/index.json is not JSON: `);
    expect(existsSync(path.join(dir, 'rootfs'))).toBe(false);
  });

  it('refuses a layer that would write through a symlink out of the rootfs', async () => {
    const outside = tree('outside', {});
    const lower = tree('sl1', {});
    symlinkSync(outside, path.join(lower, 'escape'));
    const upper = tree('sl2', { 'escape/owned': 'x' });
    const { dir: oci } = layout([lower, upper]);
    await expect(unpackImage(realExec(), oci, path.join(dir, 'rootfs'))).rejects.toThrow(/symlink that leads out of the rootfs/);
    expect(readdirSync(outside)).toEqual([]);
  });

  it('follows a relative directory symlink of a lower layer (merged /usr)', async () => {
    const lower = tree('u1', { 'usr/lib/base': 'b' });
    symlinkSync('usr/lib', path.join(lower, 'lib'));
    const upper = tree('u2', { 'lib/added': 'a' });
    const { dir: oci } = layout([lower, upper]);
    const rootfs = path.join(dir, 'rootfs');
    await unpackImage(realExec(), oci, rootfs);
    expect(readFileSync(path.join(rootfs, 'usr/lib/added'), 'utf8')).toBe('a');
  });
});

describe('whiteouts', () => {
  it('never removes through a symlinked directory or outside the root', () => {
    const root = tree('r', { 'real/victim': 'v' });
    const outside = tree('o', { precious: 'p' });
    symlinkSync(outside, path.join(root, 'link'));
    applyWhiteouts(root, ['link/.wh.precious', '../o/.wh.precious', 'link/.wh..wh..opq']);
    expect(readFileSync(path.join(outside, 'precious'), 'utf8')).toBe('p');
    applyWhiteouts(root, ['./real/.wh.victim']);
    expect(existsSync(path.join(root, 'real/victim'))).toBe(false);
  });

  it('normalises member names', () => {
    expect(memberPath('./a/b/')).toBe('a/b');
    expect(memberPath('/abs/x')).toBe('abs/x');
    expect(memberPath('./')).toBe('');
    expect(memberPath('../up')).toBeUndefined();
    expect(memberPath('a/../../up')).toBeUndefined();
  });

  it('hashes files by streaming', async () => {
    const file = path.join(dir, 'f');
    writeFileSync(file, 'hello');
    expect(await sha256File(file)).toBe(sha('hello'));
  });
});
