// Durations as a Nodefile writes them: '500ms', '10s', '2m', '1h'.

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export const DURATION_MESSAGE = "a duration is a number and a unit: '500ms', '10s', '2m' or '1h'";

/** Milliseconds, or undefined when `text` is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(text.trim());
  if (match === null) return undefined;
  return Math.round(Number(match[1]) * UNITS[match[2]!]!);
}

/** A timeout: a duration longer than none. */
export const isTimeout = (value: unknown): value is string => typeof value === 'string' && (parseDuration(value) ?? 0) > 0;
