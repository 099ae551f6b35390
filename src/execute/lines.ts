// Newline-delimited text from a byte stream: the spawn server's protocol, read
// at both ends (runner.ts and spawn-server.ts). Imports nothing, so the server
// stays small.

/** Calls `onLine` for every complete line (without its newline); returning false stops reading the current chunk. */
export function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => boolean | void): void {
  let parts: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => {
    let from = 0;
    let newline: number;
    while ((newline = chunk.indexOf(10, from)) !== -1) {
      parts.push(chunk.subarray(from, newline));
      const line = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString();
      parts = [];
      from = newline + 1;
      if (onLine(line) === false) return;
    }
    if (from < chunk.length) parts.push(chunk.subarray(from));
  });
}
