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
 */
export function unchangedOutputHash(
  text: string,
  node: TaskNode,
  definition: ContentHash,
  observation: TaskObservation,
  upstream: readonly ContentHash[],
): ContentHash | undefined {
  if (observation.check !== undefined && !observation.check.ok) return undefined;
  // `{"v":1,"id":` + the id + `,"status":"ok","fingerprint":"`: the journal checked this much.
  // (The journal keeps as text only records whose id JSON writes without escapes.)
  let at = 12 + node.id.length + 2 + 30;
  if (!isHash(text.slice(at, at + HASH_LENGTH))) return undefined;
  at += HASH_LENGTH;
  // Compared piece by piece where they stand in the text: nothing is concatenated.
  // (A slice and === is about twice as fast as startsWith here.)
  const next = (piece: string): boolean => {
    const end = at + piece.length;
    if (text.slice(at, end) !== piece) return false;
    at = end;
    return true;
  };
  const pair = (key: string, hash: string, first: boolean): boolean =>
    (first || next(',')) && next(JSON.stringify(key)) && next(':"') && next(hash) && next('"');
  if (!next('","definition":"') || !next(definition) || !next('","inputs":{')) return undefined;
  let first = true;
  for (const [name, hash] of observation.inputs) {
    if (!pair(name, hash, first)) return undefined;
    first = false;
  }
  if (!next('},"upstream":{')) return undefined;
  for (let i = 0; i < node.needs.length; i++) if (!pair(node.needs[i]!, upstream[i]!, i === 0)) return undefined;
  if (!next('},"outputs":{')) return undefined;
  first = true;
  for (const [output, hash] of observation.outputs) {
    if (hash === 'missing' || !pair(output, hash, first)) return undefined;
    first = false;
  }
  if (!next('},"outputHash":"')) return undefined;
  const outputHash = text.slice(at, at + HASH_LENGTH);
  if (!isHash(outputHash) || !text.startsWith('","edges":{', at + HASH_LENGTH)) return undefined;
  return outputHash as ContentHash;
}

function isHash(s: string): boolean {
  if (s.length !== HASH_LENGTH || !s.startsWith('sha256:')) return false;
  for (let i = 7; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}
