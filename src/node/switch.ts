// A slot switch under way, as a durable marker beside the slots
// (`<layout>/switch.json`): which slot the node switches from and to, and
// whether the takeover's resets (kubelet's credentials, host networking) are
// done. The takeover writes it before it stops the old slot; verified clears it
// once the new slot answers; it is a preserved path, so a rollback gives back
// what it was before the apply (none). So a run cut short anywhere in a switch
// leaves the next run knowing that a switch is under way, from which slot, and
// whether its resets happened: they happen exactly once.
//
//   (none) ──takeover──▶ {from, to, reset: false} ──resets──▶ {…, reset: true} ──verified──▶ (none)
//          ◀──────────────────── rollback (preserved: restored) ─────────────────────┘

import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';

export interface SwitchUnderWay {
  /** The slots that ran before: the old ones, frozen until the new one is healthy. */
  readonly from: readonly string[];
  /** The slot that takes over. */
  readonly to: string;
  /** Whether the takeover's resets are done. */
  readonly reset: boolean;
}

export const switchMarkerOf = (layoutDir: string): string => path.join(layoutDir, 'switch.json');

/** The switch the marker names, or undefined when there is none (or it cannot be read: nothing is under way). */
export function readSwitch(file: string): SwitchUnderWay | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(text) as Partial<SwitchUnderWay>;
    if (!Array.isArray(value.from) || typeof value.to !== 'string' || typeof value.reset !== 'boolean') return undefined;
    return { from: value.from.filter((s): s is string => typeof s === 'string'), to: value.to, reset: value.reset };
  } catch {
    return undefined;
  }
}

/** Writes the marker durably (a new file, fsynced, renamed into place, the folder fsynced). */
export function writeSwitch(file: string, value: SwitchUnderWay): void {
  const temp = `${file}.${process.pid}.tmp`;
  const fd = openSync(temp, 'w', 0o644);
  try {
    writeSync(fd, `${JSON.stringify(value)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, file);
  syncDir(path.dirname(file));
}

/** Removes the marker if it names a switch to `slot`; says whether it did. */
export function clearSwitch(file: string, slot: string): boolean {
  if (readSwitch(file)?.to !== slot) return false;
  rmSync(file, { force: true });
  syncDir(path.dirname(file));
  return true;
}

function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
