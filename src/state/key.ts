// The state folder's secret key: 32 random bytes in `<state>/key`, readable by
// its owner only. Sensitive values and env inputs are recorded as an HMAC under
// it (hash/value.ts, keyedHash), so equal values still compare equal while a
// record, a plan or `explain` gives nothing to test a guessed secret against
// offline. The key is never printed.

import { closeSync, fsyncSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Failure } from '../error.ts';
import { fsyncDir } from '../util/fsync.ts';
import { randomId } from '../util/random.ts';
import { err, ok, type Result } from '../util/result.ts';
import { ensureStateDir, errnoCode, errnoMessage, unwritable } from './errors.ts';

export const KEY_FILE = 'key';
export const KEY_BYTES = 32;

const { randomBytes } = process.getBuiltinModule('node:crypto');

/**
 * The key of `stateDir`. When there is none yet, a writer (`create`, holding the
 * lock) makes it: written whole to a private temp file, then linked into place,
 * so no reader ever sees a partial key and of two makers one wins and both use
 * its key. A reader that finds none gets a key of its own for this process: no
 * record can hold a digest under a key that does not exist yet. A saved plan
 * (`plan --out`) makes the key, as a writer does: its digests are compared with
 * an apply's.
 */
export function stateKey(stateDir: string, create: boolean): Result<Uint8Array, Failure> {
  const path = join(stateDir, KEY_FILE);
  const read = readKey(path);
  if (read !== 'missing') return read;
  if (!create) return ok(randomBytes(KEY_BYTES));
  const dir = ensureStateDir(stateDir);
  if (!dir.ok) return dir;
  const tmp = join(stateDir, `${KEY_FILE}.${process.pid}-${randomId().slice(0, 8)}.tmp`);
  let fd: number | undefined;
  try {
    fd = openSync(tmp, 'wx', 0o600);
    writeSync(fd, randomBytes(KEY_BYTES));
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    try {
      linkSync(tmp, path);
    } catch (e) {
      if (errnoCode(e) !== 'EEXIST') throw e;
    }
    fsyncDir(stateDir);
  } catch (e) {
    return err(unwritable(stateDir, e, true));
  } finally {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      // never made, or already gone
    }
  }
  const made = readKey(path);
  return made === 'missing' ? err({ reason: 'state-unreadable', path, message: `the state key ${path} vanished as it was made` }) : made;
}

function readKey(path: string): Result<Uint8Array, Failure> | 'missing' {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    if (errnoCode(e) === 'ENOENT') return 'missing';
    return err({ reason: 'state-unreadable', path, message: `cannot read the state key ${path}: ${errnoMessage(e)}` });
  }
  if (bytes.length !== KEY_BYTES) {
    return err({ reason: 'state-unreadable', path, message: `the state key ${path} is ${bytes.length} bytes, not ${KEY_BYTES}; remove it to make a new one (sensitive inputs then count as changed once)` });
  }
  return ok(bytes);
}
