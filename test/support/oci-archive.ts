// A tiny OCI image archive, written by hand: one layer holding one file, its
// config, manifest and index, in the OCI image layout, packed with tar.
// Nothing is downloaded; containerd imports it as it would a staged image.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface OciArchiveSpec {
  /** The image's name in containerd, e.g. `nodegraph.test/hello:1`. */
  readonly ref: string;
  /** The one file in the layer, and its text (change it to get another image). */
  readonly file: string;
  readonly content: string;
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** Writes the archive to `archive` (through a temporary sibling, then renamed); returns the manifest's digest. */
export function writeOciArchive(archive: string, spec: OciArchiveSpec): string {
  const work = mkdtempSync(path.join(path.dirname(archive), '.oci-'));
  try {
    const layout = path.join(work, 'layout');
    const blobs = path.join(layout, 'blobs/sha256');
    mkdirSync(blobs, { recursive: true });
    const blob = (bytes: Buffer): { digest: string; size: number } => {
      const hex = sha256(bytes);
      writeFileSync(path.join(blobs, hex), bytes);
      return { digest: `sha256:${hex}`, size: bytes.length };
    };

    const tree = path.join(work, 'tree');
    mkdirSync(path.dirname(path.join(tree, spec.file)), { recursive: true });
    writeFileSync(path.join(tree, spec.file), spec.content);
    const layerTar = path.join(work, 'layer.tar');
    // Fixed owner and time, so the same content makes the same layer.
    execFileSync('tar', ['--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--sort=name', '-cf', layerTar, '-C', tree, '.']);
    const layerBytes = readFileSync(layerTar);
    const layer = blob(layerBytes);

    const config = blob(
      Buffer.from(
        JSON.stringify({
          architecture: goArch(),
          os: 'linux',
          config: { Cmd: ['/bin/sh'] },
          rootfs: { type: 'layers', diff_ids: [`sha256:${sha256(layerBytes)}`] },
        }),
      ),
    );
    const manifest = blob(
      Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
          layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
        }),
      ),
    );
    writeFileSync(path.join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    writeFileSync(
      path.join(layout, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifest,
            platform: { architecture: goArch(), os: 'linux' },
            annotations: { 'io.containerd.image.name': spec.ref, 'org.opencontainers.image.ref.name': spec.ref.split(':').at(-1)! },
          },
        ],
      }),
    );
    const temp = path.join(work, 'archive.tar');
    execFileSync('tar', ['--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '--sort=name', '-cf', temp, '-C', layout, '.']);
    execFileSync('mv', [temp, archive]);
    return manifest.digest;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The architecture as OCI (Go) names it. */
function goArch(): string {
  switch (process.arch) {
    case 'x64':
      return 'amd64';
    case 'ia32':
      return '386';
    default:
      return process.arch; // arm64, arm, ppc64, s390x, riscv64 are spelled the same
  }
}
