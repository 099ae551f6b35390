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

/**
 * `piece` stands at AT: step over it. startsWith compares in one native call
 * what a loop of charCodeAt would compare in the interpreter on a small run,
 * before V8 has optimised this: 10 % of a 1,000-task no-op's instructions and
 * 9 % of a 10,000-task one's, with the regex in hash() below (callgrind).
 */
function lit(piece: string): boolean {
  if (!T.startsWith(piece, AT)) return false;
  AT += piece.length;
  return true;
}

/** A character JSON.stringify escapes: `"`, `\\`, a control, or a surrogate (it escapes a lone one). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** The JSON string of `s` stands at AT. Written out only when `s` has a character JSON escapes. */
function str(s: string): boolean {
  if (T.charCodeAt(AT) !== 0x22) return false;
  if (ESCAPED.test(s)) return lit(JSON.stringify(s));
  // Without such a character a string's JSON is the string in quotes.
  if (!T.startsWith(s, AT + 1) || T.charCodeAt(AT + 1 + s.length) !== 0x22) return false;
  AT += s.length + 2;
  return true;
}

/** `"key":"hash"`, after a comma unless it is the first. */
function pair(key: string, value: string, first: boolean): boolean {
  return (first || lit(',')) && str(key) && lit(':"') && lit(value) && lit('"');
}

/** `sha256:` and 64 lowercase hex digits stand at AT, followed by the closing quote. */
const HASH_AT = /sha256:[0-9a-f]{64}"/y;

function hash(): boolean {
  HASH_AT.lastIndex = AT;
  if (!HASH_AT.test(T)) return false;
  AT += HASH_LENGTH; // the quote is the next thing a caller steps over
  return true;
}
