// Where the CLI writes its text: stdout and stderr, through Node's stream
// classes only when they are a terminal.
//
// process.stdout builds a stream object the first time it is read, and with it
// Node's stream modules (and net's, for a pipe): about 8 % of a 1,000-task
// no-op's instructions, for a few lines of text. Written to a file, a pipe or
// /dev/null, the same text goes out with writeSync, as process.stdout would
// write it there on Linux (synchronously). A terminal keeps process.stdout: the
// live view and readline need it, and what it is for (isTTY, colour) is asked of it.

const { fstatSync, statSync, writeSync } = process.getBuiltinModule('node:fs');

export interface CliIo {
  readonly stdout: Output;
  readonly stderr: Output;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly signal: AbortSignal;
  /** --json was given: errors also go to stdout, as JSON lines (see printFailures). */
  readonly json?: boolean;
  /** --timings was given: told as each step ends (EngineOptions.onPhase). */
  readonly onPhase?: (phase: string, detail?: string) => void;
}

export interface Output {
  write(text: string): void;
  /** A terminal (colour and the live view are for terminals only). */
  readonly isTTY: boolean;
}

/**
 * Output that nobody reads any more (`| head`, a closed terminal) is dropped:
 * the run goes on, unheard, and ends as it would. Unhandled, Node's EPIPE or
 * EIO would end the process mid-run with commands still running and finished
 * work unrecorded.
 */
const deaf = (): void => {};

/** The streams written through (a terminal, or a pipe that was full): what they hold goes out before the exit. */
const streams = new Set<NodeJS.WriteStream>();

/** Resolves once every stream written through has handed on what it was given (or failed to). */
export function drained(): Promise<unknown> {
  return Promise.all([...streams].map((s) => new Promise<void>((resolve) => s.write('', () => resolve()))));
}

export function outputOf(fd: 1 | 2): Output {
  const stream = (): NodeJS.WriteStream => {
    const s = fd === 1 ? process.stdout : process.stderr;
    if (!s.listeners('error').includes(deaf)) s.on('error', deaf);
    streams.add(s);
    return s;
  };
  let kind: 'stream' | 'fd' | 'closed';
  try {
    const st = fstatSync(fd);
    kind = st.isCharacterDevice() && st.rdev !== statSync('/dev/null').rdev ? 'stream' : 'fd';
  } catch {
    kind = 'closed'; // no such descriptor: nothing to write to
  }
  if (kind === 'stream') {
    const s = stream();
    return { write: (text) => void s.write(text), isTTY: s.isTTY === true };
  }
  let fallback: NodeJS.WriteStream | undefined;
  return {
    isTTY: false,
    write(text: string): void {
      if (kind === 'closed') return;
      if (fallback !== undefined) {
        fallback.write(text);
        return;
      }
      const bytes = Buffer.from(text);
      let at = 0;
      while (at < bytes.length) {
        try {
          at += writeSync(fd, bytes, at);
        } catch (error) {
          // A pipe another process made non-blocking, and full: the stream waits for it, in order.
          if ((error as NodeJS.ErrnoException).code === 'EAGAIN') {
            fallback = stream();
            fallback.write(bytes.subarray(at));
          } else {
            kind = 'closed';
          }
          return;
        }
      }
    },
  };
}
