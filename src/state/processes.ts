// What a run started, where the next holder of the lock finds it.
//
// A run killed with -9 leaves its commands running: they are in sessions of
// their own (spawnd's, and each directly spawned command's), so neither a
// signal to the engine's group nor its exit reaches them. While it holds the
// lock, a run records every session it starts in `<state>/processes.<token>`:
// a first line of who it is (the lock's info), then one line per process,
// `<pid> <start>` (start: /proc/<pid>/stat's 22nd field). The next run that
// takes the lock reads the files of dead holders and ends, with SIGKILL,
// every process still in one of those sessions, before anything else; a
// finished run removes its own file as it releases the lock.
//
// Why recorded sessions, not PR_SET_PDEATHSIG alone: the death signal reaches
// only the direct child (a shell's `sleep`, or a job it put in the
// background, would go on), while a session holds everything its leader
// started that did not leave it. What leaves its session (setsid, a daemon,
// `runc run --detach`'s container, whose init calls setsid in its own pid
// namespace) is meant to outlive the command: it is machine state, and the
// rollback reconciles it. spawnd does set PR_SET_PDEATHSIG on itself, so a
// killed engine's spawnd stops at once and starts no request still queued.
//
// The record is written with write(2), not fsync'd: a kill -9 does not lose
// what was written, and a power loss ends the processes too. A directly
// spawned command exists from spawn() until its line is appended; for a kill
// landing there, a line `? <n>` is written before the spawn and the command's
// environment carries NODEGRAPH_SPAWN=<engine pid>.<its start>.<n> (as systemd
// marks a unit's processes with INVOCATION_ID): a `? <n>` with no line after it
// is a spawn the run did not live to record, found again by that mark. spawnd's
// line is written before any command is sent to it, so its commands need none.

import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { pause } from '../util/pause.ts';

/** Who wrote a record: the same fields as the lock's info (src/state/lock.ts LockInfo). */
export interface RecordHolder {
  readonly pid: number;
  readonly host: string;
  readonly command: string;
  readonly startedAt: string;
  readonly token: string;
  readonly bootId?: string;
  readonly pidStart?: number;
}

/** A process ended for a dead run: its pid and its command line. */
export interface EndedProcess {
  readonly pid: number;
  readonly command: string;
}

/** What ending one dead run's processes did. */
export interface EndedRun {
  readonly holder: RecordHolder;
  readonly ended: readonly EndedProcess[];
  /** Still there when we stopped waiting (in uninterruptible sleep), or not ours to signal (EPERM). */
  readonly remaining: readonly EndedProcess[];
}

/** A run's record, beside the lock: a file, not a folder of them (a mkdir and rmdir cost every run about 0.1 ms more). */
const RECORD = 'processes.';
export const recordPath = (stateDir: string, token: string): string => join(stateDir, `${RECORD}${token}`);

interface ProcStat {
  readonly pid: number;
  readonly state: string;
  readonly session: number;
  readonly start: number | undefined;
}

/**
 * What Linux's /proc/<pid>/stat says of a process: its state (field 3), session
 * (field 6) and when it started (field 22, clock ticks since boot). The fields
 * follow the command name, which is in parentheses and may itself hold any
 * character: hence the last ')'. Undefined without /proc or without the process.
 */
export function procStat(pid: number): ProcStat | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[19]);
  return { pid, state: fields[0] ?? '', session: Number(fields[3]), start: Number.isSafeInteger(start) ? start : undefined };
}

// ---- recording (the lock holder) ------------------------------------------

/** The record files this process writes to: one per lock it holds. */
const open = new Map<string, number>();
/** Lines of processes that outlive a run (the shared spawnd, which `watch` keeps from one run to the next): every new record begins with them. */
const lasting = new Map<number, string>();

/** Starts the record of the run holding `holder`'s lock; undefined when it cannot be written (nothing is then recorded). */
export function openRecord(stateDir: string, holder: RecordHolder): string | undefined {
  const file = recordPath(stateDir, holder.token);
  try {
    const fd = openSync(file, 'a', 0o644);
    writeSync(fd, `${JSON.stringify(holder)}\n${[...lasting.values()].join('')}`);
    open.set(file, fd);
    return file;
  } catch {
    return undefined;
  }
}

/** Ends a record at the end of its run: the file goes. */
export function closeRecord(file: string | undefined): void {
  if (file === undefined) return;
  const fd = open.get(file);
  open.delete(file);
  try {
    if (fd !== undefined) closeSync(fd);
    unlinkSync(file);
  } catch {
    // removed already: nothing to do
  }
}

/**
 * Records a process this engine just started (its session with it) in every record open; called right after spawn.
 * `lasting`: it may outlive the run (spawnd), so each record opened later gets it too, until noteGone.
 */
export function noteStarted(pid: number | undefined, lasts = false): void {
  if (pid === undefined || (open.size === 0 && !lasts)) return;
  const start = procStat(pid)?.start;
  // Without a start time a later run could not tell it from a process that reused the pid: not recorded.
  if (start === undefined) return;
  const line = `${pid} ${start}\n`;
  if (lasts) lasting.set(pid, line);
  for (const fd of open.values()) {
    try {
      writeSync(fd, line);
    } catch {
      // a record that cannot be written is a record that misses this process
    }
  }
}

/** The environment variable that marks a directly spawned command (see the top). */
export const SPAWN_MARK = 'NODEGRAPH_SPAWN';
let spawns = 0;
let ownStart: number | undefined;
const markOf = (pid: number, start: number | undefined, n: number): string => `${SPAWN_MARK}=${pid}.${start ?? '?'}.${n}`;

/**
 * Called right before a direct spawn: notes in every record open that one is under way, and
 * returns what the command's environment must carry so that the next run can find it should
 * this one be killed before noteStarted. Empty when no record is open.
 */
export function notePending(): Record<string, string> {
  if (open.size === 0) return {};
  const n = ++spawns;
  for (const fd of open.values()) {
    try {
      writeSync(fd, `? ${n}\n`);
    } catch {
      // as in noteStarted
    }
  }
  ownStart ??= procStat(process.pid)?.start;
  const [name, value] = markOf(process.pid, ownStart, n).split('=') as [string, string];
  return { [name]: value };
}

/** A lasting process (noteStarted) has ended: records opened from now on leave it out. */
export function noteGone(pid: number | undefined): void {
  if (pid !== undefined) lasting.delete(pid);
}

// ---- ending (the next holder) ----------------------------------------------

interface ParsedRecord {
  readonly holder: RecordHolder;
  readonly started: { pid: number; start: number }[];
  /** Spawns noted as under way (`? <n>`) with no line of their process after them. */
  readonly pending: number[];
}

function parseRecord(content: string): ParsedRecord | undefined {
  const [first, ...lines] = content.split('\n');
  let holder: RecordHolder;
  try {
    holder = JSON.parse(first ?? '') as RecordHolder;
  } catch {
    return undefined;
  }
  if (typeof holder !== 'object' || holder === null || !Number.isSafeInteger(holder.pid) || typeof holder.host !== 'string') return undefined;
  const started: { pid: number; start: number }[] = [];
  const pending: number[] = [];
  let under: number | undefined;
  for (const line of lines) {
    const m = /^(\d+) (\d+)$/.exec(line);
    // pid 0 and 1 are never a command of ours; a torn last line is skipped.
    if (m !== null && Number(m[1]) > 1) started.push({ pid: Number(m[1]), start: Number(m[2]) });
    // A pid line right after `? <n>` is that spawn's; anything else means it was never recorded.
    if (under !== undefined && m === null) pending.push(under);
    const p = /^\? (\d+)$/.exec(line);
    under = p === null ? undefined : Number(p[1]);
  }
  if (under !== undefined) pending.push(under);
  return { holder, started, pending };
}

function carries(pid: number, marks: ReadonlySet<string>): string | undefined {
  let environ: string;
  try {
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined; // gone, or another user's
  }
  return environ.split('\0').find((entry) => marks.has(entry));
}

/**
 * The sessions of spawns a dead run noted as under way but did not record, found by their mark:
 * the earliest process carrying a spawn's mark is the command itself, or, once it has exited, its
 * oldest survivor, still in the command's session unless it made one of its own. The session is
 * dated by its leader while the leader is there, a zombie included (an orphan's reaper may take its
 * time; a zombie's environment is empty, so it is never the one found by the mark).
 */
function unrecorded(record: ParsedRecord): { pid: number; start: number }[] {
  if (record.pending.length === 0) return [];
  const procs = allProcesses();
  const marks = new Set(record.pending.map((n) => markOf(record.holder.pid, record.holder.pidStart, n)));
  const earliest = new Map<string, ProcStat>();
  for (const p of procs) {
    if (p.pid === process.pid || p.start === undefined) continue;
    const mark = carries(p.pid, marks);
    if (mark === undefined) continue;
    const seen = earliest.get(mark);
    if (seen === undefined || p.start < seen.start! || (p.start === seen.start && p.pid < seen.pid)) earliest.set(mark, p);
  }
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  return [...earliest.values()].map((p) => ({ pid: p.session, start: byPid.get(p.session)?.start ?? p.start! }));
}

function allProcesses(): ProcStat[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: ProcStat[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const stat = procStat(Number(name));
    if (stat !== undefined) out.push(stat);
  }
  return out;
}

const pidNamespace = (pid: number | 'self'): string | undefined => {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
};

function commandLine(pid: number): string {
  let line = '';
  try {
    line = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replaceAll('\0', ' ');
  } catch {
    // gone meanwhile
  }
  if (line === '') {
    try {
      line = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      line = '?';
    }
  }
  // One line, whatever the arguments hold (a shell script's newlines).
  line = line.replace(/\s+/g, ' ').trim();
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/**
 * The processes of the recorded sessions that still run. A recorded process is
 * the same process only if it started when the record says; its session id
 * cannot have been given to another session while any member is left (the
 * kernel keeps a pid number while it names a session), so a member that
 * started no earlier than the leader belongs to it. A pid now held by a
 * process that started at another time means the session is gone. Zombies
 * have ended already; a process in another pid namespace is a container,
 * machine state and not a command.
 */
function members(started: readonly { pid: number; start: number }[], procs: readonly ProcStat[], ownNs: string | undefined): ProcStat[] {
  const byPid = new Map<number, ProcStat>();
  const bySession = new Map<number, ProcStat[]>();
  for (const p of procs) {
    byPid.set(p.pid, p);
    if (p.pid === process.pid || p.state === 'Z' || p.state === 'X') continue;
    let list = bySession.get(p.session);
    if (list === undefined) bySession.set(p.session, (list = []));
    list.push(p);
  }
  const found = new Map<number, ProcStat>();
  for (const s of started) {
    const leader = byPid.get(s.pid);
    if (leader !== undefined && leader.start !== s.start) continue;
    const candidates = (bySession.get(s.pid) ?? []).filter((p) => p.start !== undefined && p.start >= s.start);
    // The recorded process itself, even before it made its session (spawnd, killed before its setsid).
    if (leader !== undefined && leader.state !== 'Z' && leader.state !== 'X' && leader.pid !== process.pid) candidates.push(leader);
    for (const p of candidates) {
      if (found.has(p.pid)) continue;
      if (ownNs !== undefined) {
        const ns = pidNamespace(p.pid);
        if (ns !== undefined && ns !== ownNs) continue;
      }
      found.set(p.pid, p);
    }
  }
  return [...found.values()];
}

/** How long ending a dead run's processes may wait for them to be gone. */
const END_WITHIN_MS = 10_000;

/**
 * SIGKILLs the recorded sessions' processes until none is left (a member may
 * fork before it is signaled), or the time is up. One we may not signal (EPERM:
 * a setuid program such as sudo, run as another user) is not waited for.
 */
function endSessions(started: readonly { pid: number; start: number }[]): { ended: EndedProcess[]; remaining: EndedProcess[] } {
  const ownNs = pidNamespace('self');
  const seen = new Map<number, EndedProcess>();
  const refused = new Set<number>();
  const deadline = Date.now() + END_WITHIN_MS;
  let left: ProcStat[] = [];
  for (;;) {
    left = members(started, allProcesses(), ownNs).filter((p) => !refused.has(p.pid));
    if (left.length === 0 || Date.now() > deadline) break;
    for (const p of left) {
      if (!seen.has(p.pid)) seen.set(p.pid, { pid: p.pid, command: commandLine(p.pid) });
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EPERM') refused.add(p.pid);
      }
    }
    pause(2);
  }
  const still = new Set([...left.map((p) => p.pid), ...refused]);
  const remaining = [...still].map((pid) => seen.get(pid) ?? { pid, command: commandLine(pid) });
  return { ended: [...seen.values()].filter((e) => !still.has(e.pid)), remaining };
}

/**
 * Ends the processes of every run that recorded them and is no longer running
 * (`alive` says, as for its lock), and removes their records; called by the new
 * holder of the lock before anything else. A record of a live holder (its lock
 * was broken by hand) or of another host is left alone; one of an earlier boot
 * only removed.
 */
export function endLeftovers(stateDir: string, ownToken: string, alive: (holder: RecordHolder) => 'alive' | 'dead' | 'other-host'): EndedRun[] {
  let names: string[];
  try {
    names = readdirSync(stateDir).filter((n) => n.startsWith(RECORD));
  } catch {
    return [];
  }
  const runs: EndedRun[] = [];
  for (const name of names) {
    if (name === `${RECORD}${ownToken}`) continue;
    const file = join(stateDir, name);
    let content: string;
    try {
      content = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    const record = parseRecord(content);
    if (record !== undefined) {
      if (alive(record.holder) !== 'dead') continue;
      const otherBoot = record.holder.bootId !== undefined && record.holder.bootId !== bootId();
      const started = otherBoot ? [] : [...record.started, ...unrecorded(record)];
      if (started.length > 0) {
        const { ended, remaining } = endSessions(started);
        // Tried once: what would not end is reported, and not waited for again by every later run.
        if (ended.length > 0 || remaining.length > 0) runs.push({ holder: record.holder, ended, remaining });
      }
    }
    // An unreadable record is one torn by a crash in openRecord: it holds no process.
    try {
      unlinkSync(file);
    } catch {
      // removed by another run
    }
  }
  return runs;
}

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The warning for the user: which processes of which killed run were ended. */
export function endedMessage(run: EndedRun): string {
  const list = (ps: readonly EndedProcess[]): string => ps.map((p) => `${p.pid} (${p.command})`).join(', ');
  const n = run.ended.length;
  const head = `ended ${n} process${n === 1 ? '' : 'es'} of the killed run ${run.holder.pid} (${run.holder.command}, since ${run.holder.startedAt})`;
  const ended = n > 0 ? `: ${list(run.ended)}` : '';
  const left = run.remaining.length > 0 ? `; still running (SIGKILL did not end them, or was not permitted): ${list(run.remaining)}` : '';
  return `${head}${ended}${left}`;
}
