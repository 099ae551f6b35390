// Strings kept for a whole run, as one flat string each.

/**
 * `s` as one flat string. A path built by concatenation (`obj/${name}.o`, or a
 * folder joined to it) is a rope of V8 concatenation cells until something
 * flattens it, and a flattened rope keeps its top cell, 32 bytes, for as long
 * as anything holds it: two or three such cells a task, kept for every task
 * of a large graph, are megabytes. normalize() flattens,
 * and returns the flat string itself when it is in NFC already (every ASCII
 * string is); a string it would change is returned as it was.
 */
export function flat(s: string): string {
  const normal = s.normalize();
  return normal === s ? normal : s;
}
