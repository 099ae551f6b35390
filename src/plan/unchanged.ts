// The planner's shortcut for the common case: a task whose record, as the
// journal wrote it, is exactly the record a run would write for what was
// observed now. Its definition, inputs, upstream outputs and outputs are then
// all as recorded, so `decide` could only say "unchanged": the record is not
// decoded at all (state/records.ts).
//
// The comparison is of text, built the way the journal builds it
// (JSON.stringify of the record, keys in canonical order). Anything that
// builds differently — keys JSON orders otherwise (integer-like names), an
// output that is missing, a record written another way — only fails to
// match, and the task goes through `decide` like any other. A match can only
// come from equal values: JSON.stringify is one-to-one on strings.

import type { ContentHash } from '../ids.ts';
import type { TaskNode } from '../graph/graph.ts';
import type { TaskObservation } from './decide.ts';

const HASH_LENGTH = 'sha256:'.length + 64;

/**
 * The record's output hash when `text` (a record's JSON, known to start with
 * `{"v":1,"id":<id>,"status":"ok","fingerprint":"`) records exactly this
 * definition, these inputs, these upstream output hashes and these outputs;
 * undefined otherwise. `upstream` is the output hash of each of the task's
 * needs, in `node.needs` order.
 *
 * A no-op calls this for every task, so it allocates nothing but the hash it
 * returns: characters are compared where they stand, with no slice, no
 * concatenation and no JSON.stringify of a string that needs no escape.
 */
export function unchangedOutputHash(
  text: string,
  node: TaskNode,
  definition: ContentHash,
  observation: TaskObservation,
  upstream: readonly ContentHash[],
): ContentHash | undefined {
  if (observation.check !== undefined && !observation.check.ok) return undefined;
  T = text;
  // `{"v":1,"id":` + the id + `,"status":"ok","fingerprint":"`: the journal checked this much.
  // (The journal keeps as text only records whose id JSON writes without escapes.)
  AT = 12 + node.id.length + 2 + 30;
  try {
    if (!hash() || !lit('","definition":"') || !lit(definition) || !lit('","inputs":{')) return undefined;
    let first = true;
    for (const name of observation.inputs.keys()) {
      if (!pair(name, observation.inputs.get(name)!, first)) return undefined;
      first = false;
    }
    if (!lit('},"upstream":{')) return undefined;
    for (let i = 0; i < node.needs.length; i++) if (!pair(node.needs[i]!, upstream[i]!, i === 0)) return undefined;
    if (!lit('},"outputs":{')) return undefined;
    first = true;
    for (const output of observation.outputs.keys()) {
      const seen = observation.outputs.get(output)!;
      if (seen === 'missing' || !pair(output, seen, first)) return undefined;
      first = false;
    }
    if (!lit('},"outputHash":"')) return undefined;
    const start = AT;
    if (!hash() || !lit('","edges":{')) return undefined;
    return text.slice(start, start + HASH_LENGTH) as ContentHash;
  } finally {
    T = '';
  }
}

// The text being compared and the position in it (module state: no closure per call).
let T = '';
let AT = 0;

/** `piece` stands at AT: step over it. */
function lit(piece: string): boolean {
  const n = piece.length;
  if (AT + n > T.length) return false;
  for (let i = 0; i < n; i++) if (T.charCodeAt(AT + i) !== piece.charCodeAt(i)) return false;
  AT += n;
  return true;
}

/** The JSON string of `s` stands at AT. Written out only when `s` has a character JSON escapes. */
function str(s: string): boolean {
  if (T.charCodeAt(AT) !== 0x22) return false;
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    // `"`, `\`, controls and surrogates (JSON.stringify escapes a lone one): compare with the real JSON.
    if (c === 0x22 || c === 0x5c || c < 0x20 || (c >= 0xd800 && c <= 0xdfff)) return lit(JSON.stringify(s));
    // Up to the first such character a string and its JSON agree.
    if (T.charCodeAt(AT + 1 + i) !== c) return false;
  }
  if (T.charCodeAt(AT + 1 + n) !== 0x22) return false;
  AT += n + 2;
  return true;
}

/** `"key":"hash"`, after a comma unless it is the first. */
function pair(key: string, value: string, first: boolean): boolean {
  return (first || lit(',')) && str(key) && lit(':"') && lit(value) && lit('"');
}

/** `sha256:` and 64 lowercase hex digits stand at AT, followed by the closing quote. */
function hash(): boolean {
  if (!lit('sha256:') || AT + 65 > T.length) return false;
  for (let i = AT; i < AT + 64; i++) {
    const c = T.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  AT += 64;
  return T.charCodeAt(AT) === 0x22;
}
