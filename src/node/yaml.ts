// YAML in and out: the one `yaml` import. Output is plain block YAML with
// no anchors, so it reads the same in any tool.

import { Document, parse, visit } from 'yaml';

/**
 * A string a YAML 1.1 reader (Go's yaml.v2, which kubelet's configuration loading goes through) would
 * read as something else when written plain, though YAML 1.2 leaves it a string: `yes`, `off` (booleans),
 * `1_000`, `0o17` (Go's integers), `12:30` (base 60), `<<` (the merge key). A taint value `yes` would
 * reach kubelet as `true`. Such strings are written quoted.
 */
const GO_INTEGER = /^[-+]?(0[bBoOxX]?[0-9a-fA-F_]*|[1-9][0-9_]*)$/;
function readsAsOther(s: string): boolean {
  if (GO_INTEGER.test(s) || s === '<<' || s === '=') return true;
  try {
    return parse(s, { version: '1.1' }) !== s;
  } catch {
    return true;
  }
}

export const toYaml = (value: unknown): string => {
  const doc = new Document(value, { aliasDuplicateObjects: false });
  visit(doc, {
    Scalar(_, node) {
      if (typeof node.value === 'string' && readsAsOther(node.value)) node.type = 'QUOTE_DOUBLE';
    },
  });
  return doc.toString({ lineWidth: 0 });
};
export const fromYaml = (text: string): unknown => parse(text);
