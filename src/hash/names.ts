// File names that are not UTF-8. Node lists a folder as strings, turning each byte
// that is not UTF-8 into U+FFFD: such a name, so listed, opens nothing, and a walk
// that skipped it would vouch for a whole it never read. A tree or glob that meets
// one refuses it by name instead.

import { readdirSync } from 'node:fs';
import path from 'node:path';

/** A tree or a glob met a file whose name is not UTF-8; `path`, absolute, spells its bytes (`/srv/caf\xe9`). */
export class NameNotUtf8 extends Error {
  readonly path: string;

  constructor(file: string) {
    super(notUtf8(file));
    this.name = 'NameNotUtf8';
    this.path = file;
  }
}

/** What is wrong with `file` (as the message shows it), and what to do: by default, what an input's owner can. */
export const notUtf8 = (file: string, fix = 'rename it (convmv) or leave it out of the input'): string =>
  `${file} is named in bytes that are not UTF-8: nodegraph reads names as text, so it cannot read the file; ${fix}`;

const strict = new TextDecoder('utf-8', { fatal: true });

const isUtf8 = (raw: Buffer): boolean => {
  try {
    strict.decode(raw);
    return true;
  } catch {
    return false;
  }
};

/** `raw` as text, each byte that is not part of a UTF-8 character written `\xHH`. */
export function spelled(raw: Buffer): string {
  let text = '';
  for (let i = 0; i < raw.length; ) {
    const lead = raw[i]!;
    const length = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
    const char = length === 0 ? undefined : raw.subarray(i, i + length);
    if (char !== undefined && char.length === length && isUtf8(char)) {
      text += char.toString('utf8');
      i += length;
    } else {
      text += `\\x${lead.toString(16).padStart(2, '0')}`;
      i += 1;
    }
  }
  return text;
}

/**
 * Throws NameNotUtf8 when `name`, listed in folder `dir`, stands for
 * a name that is not UTF-8. Only a name holding U+FFFD can: the folder is then listed
 * again as bytes to tell it from a name that holds U+FFFD itself.
 */
export function refuseNotUtf8(dir: string, name: string): void {
  if (!name.includes('\uFFFD')) return;
  let raws: Buffer[];
  try {
    raws = readdirSync(dir, { encoding: 'buffer' });
  } catch {
    return; // gone since it was listed: the caller sees it vanish
  }
  const raw = raws.find((r) => r.toString('utf8') === name && !isUtf8(r));
  if (raw !== undefined) throw new NameNotUtf8(path.join(dir, spelled(raw)));
}
