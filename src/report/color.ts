// Colour, when the stream is a terminal and NO_COLOR does not say otherwise;
// FORCE_COLOR turns it on anywhere (https://no-color.org, FORCE_COLOR as in Node).

export interface Palette {
  readonly red: (s: string) => string;
  readonly green: (s: string) => string;
  readonly yellow: (s: string) => string;
  readonly cyan: (s: string) => string;
  readonly dim: (s: string) => string;
  readonly bold: (s: string) => string;
}

export function colorEnabled(stream: { isTTY?: boolean }, env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  const force = env['FORCE_COLOR'];
  if (force !== undefined) return force !== '0' && force !== 'false';
  if (env['NO_COLOR'] !== undefined && env['NO_COLOR'] !== '') return false;
  return stream.isTTY === true && env['TERM'] !== 'dumb';
}

const wrap = (on: boolean, open: number, close: number) => (s: string) => (on ? `\x1b[${open}m${s}\x1b[${close}m` : s);

export function palette(on: boolean): Palette {
  return {
    red: wrap(on, 31, 39),
    green: wrap(on, 32, 39),
    yellow: wrap(on, 33, 39),
    cyan: wrap(on, 36, 39),
    dim: wrap(on, 2, 22),
    bold: wrap(on, 1, 22),
  };
}
