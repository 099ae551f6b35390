// RACY ENTRIES (git's "racily clean" problem). A timestamp is a tick of the
// kernel's coarse clock truncated to the filesystem's granularity (1 ns on
// ext4/xfs/btrfs/tmpfs but advanced only every jiffy, 1–10 ms; 1 s on ext3/HFS+;
// 2 s on FAT). If a file is read in the same tick as its last change, it can be
// changed again in that tick, after the read, without size or times moving, and
// its stale hash would be trusted forever. The rule used here:
//
//   When a file is hashed, `started` is the wall-clock time (Date.now, ns) taken
//   after the stat and before its content is read. The entry is CLEAN only if
//       max(mtime, ctime) < started − margin
//   and RACY otherwise. A racy entry is kept (and saved), but never trusted: the
//   file is read again next time, and the entry becomes clean once a read finds
//   the file old enough.
//
// Why it holds: any change after our read starts is stamped at least
// `started − (clock lag + granularity)`. If margin exceeds lag + granularity,
// that stamp is strictly later than the recorded one, so the stat key moves.
// (Unlike git, which compares with the index file's mtime, this compares with
// the moment the read began, so a slow hashing run cannot open a window between
// the read and the cache write.)
//
// The margin: a file whose ctime has no sub-second part is on a whole-second
// filesystem (or, one time in 10⁹, landed on a whole second): margin 3 s, which
// covers FAT's 2 s truncation plus clock lag. Otherwise the filesystem keeps
// sub-second times (≤ 10 ms granularity on everything Linux mounts) and the
// margin is 100 ms, ten times the worst jiffy. The margin also absorbs skew
// between our clock and a file server's, up to its size; a larger skew needs a
// larger `racyMarginNs`. Max(mtime, ctime) rather than ctime alone keeps files
// with future mtimes (clock skew, archives) racy: re-read every run until their
// time has passed — slow but never wrong.
//
// The stat recorded is an fstat of the open file taken after reading it: if it
// differs from the path's stat taken before, the file changed (or was replaced)
// while being read, and it is read again (up to 3 times); if it keeps changing,
// the last read is returned and recorded racy.
//

/** What the cache keys a file by, from one stat (bigint: nanosecond times). */
export interface StatFields {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly mode: bigint;
}

const COARSE_MARGIN_NS = 3_000_000_000n;
const FINE_MARGIN_NS = 100_000_000n;
const SECOND_NS = 1_000_000_000n;

export const defaultNow = (): bigint => BigInt(Date.now()) * 1_000_000n;

/**
 * The rule above: whether a file with this stat, whose read began at
 * `started` (wall clock, ns), can be known by its stat from now on. `margin`: a
 * fixed one, else 3 s on a whole-second filesystem and 100 ms on any other.
 */
export function settledAt(st: Pick<StatFields, 'mtimeNs' | 'ctimeNs'>, started: bigint = defaultNow(), margin?: bigint): boolean {
  const changed = st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs;
  return changed < started - (margin ?? (st.ctimeNs % SECOND_NS === 0n ? COARSE_MARGIN_NS : FINE_MARGIN_NS));
}

/** Whether two stats describe the same file as it was: a file that changed while being read does not match its stat before. */
export const sameFile = (a: StatFields, b: StatFields): boolean =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
