// Type guards for what is read back from disk (a saved plan, a manifest, a
// journal record): JSON whose shape is checked before it is trusted.

/** An array of strings only (an empty one too). */
export function isStrings(v: unknown): v is string[] {
  if (!Array.isArray(v)) return false;
  for (const s of v) if (typeof s !== 'string') return false;
  return true;
}
