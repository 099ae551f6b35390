// YAML in and out: the one `yaml` import. Output is plain block YAML with
// no anchors, so it reads the same in any tool.

import { parse, stringify } from 'yaml';

export const toYaml = (value: unknown): string => stringify(value, { aliasDuplicateObjects: false, lineWidth: 0 });
export const fromYaml = (text: string): unknown => parse(text);
