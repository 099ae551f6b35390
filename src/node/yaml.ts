// YAML in and out: the one `yaml` import. Output is plain block YAML with
// no anchors, so it reads the same in any tool.

import { Document, parse, visit } from 'yaml';

/**
 * Plain words a YAML 1.1 reader (Go's yaml.v2, which kubelet's configuration loading goes through) reads
 * as a boolean, a number or the merge key, though YAML 1.2 leaves them strings: a taint value `yes`
 * would reach kubelet as `true`. Such strings are written quoted.
 */
const YAML11_BOOLEAN = /^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|true|True|TRUE|false|False|FALSE)$/;
const GO_INTEGER = /^[-+]?(0[bBoOxX]?[0-9a-fA-F_]*|[1-9][0-9_]*)$/;
/** YAML 1.1's base 60 (`1:20` is 80). */
const SEXAGESIMAL = /^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?$/;
const readsAsOther = (s: string): boolean => YAML11_BOOLEAN.test(s) || GO_INTEGER.test(s) || SEXAGESIMAL.test(s) || s === '<<' || s === '=';

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
