// A generation's manifest as the store keeps it, with its files read back from
// the parts it names (src/transaction/manifest.ts, SourcePart).

import { readFileSync } from 'node:fs';
import path from 'node:path';

export interface ManifestFile {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  readonly mode: number;
  readonly stored: string;
  /** For `stored: 'inline'`: the content, base64. */
  readonly content?: string;
}

export function readManifest(stateDir: string, n: number): Record<string, unknown> & { files: ManifestFile[]; parts?: { sha256: string }[] } {
  const stored = JSON.parse(readFileSync(path.join(stateDir, 'generations', `${n}.json`), 'utf8')) as { files?: ManifestFile[]; parts?: { sha256: string }[] };
  const files = stored.files ?? (stored.parts ?? []).flatMap((p) => JSON.parse(readFileSync(path.join(stateDir, 'generations', 'objects', p.sha256), 'utf8')) as ManifestFile[]);
  return { ...stored, files };
}
