// Schema pieces the node's settings share.

import { z } from 'zod';

/**
 * A host or node path a setting names. It is written into unit files (one
 * value per line) and TOML, so a newline or other control character in it
 * is refused here, by its field, rather than by a renderer during an apply.
 */
export const absolutePath = z
  .string()
  .regex(/^\//, 'an absolute path')
  .regex(/^[^\u0000-\u001f\u007f]*$/, 'a path without a newline or other control character');

type Issue = z.core.$ZodIssue;

/** `labels["node.example.com/pool"]`, `clusterDNS.0`: a key that is not a plain word is quoted, so its dots read as its own. */
export function issuePath(path: readonly PropertyKey[]): string {
  const segments = path.map((key) =>
    typeof key === 'number' ? `.${key}` : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(String(key)) ? `.${String(key)}` : `[${JSON.stringify(String(key))}]`,
  );
  return segments.join('').replace(/^\./, '');
}

/**
 * One line per problem in a setting: where it is and what it should be. A record's bad key and a
 * union's member the value was meant as speak in their own words, not zod's "Invalid input".
 */
export function issueLines(issues: readonly Issue[], at: readonly PropertyKey[] = []): string[] {
  return issues.flatMap((issue) => {
    const where = [...at, ...issue.path];
    if (issue.code === 'invalid_key') return issueLines(issue.issues, where);
    if (issue.code === 'invalid_union') {
      // The member whose problems all lie inside the value is the one it has the shape of.
      const shaped = issue.errors.filter((branch) => branch.length > 0 && branch.every((i) => i.path.length > 0));
      if (shaped.length === 1) return issueLines(shaped[0]!, where);
    }
    return [`${issuePath(where) || '(config)'}: ${issue.message}`];
  });
}

type Table = Record<string, unknown>;

const isTable = (v: unknown): v is Table => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** An `extra` over a generated document: tables merge key by key, so a setting beside ours keeps ours; anything else replaces. */
export function deepMerge(base: Table, over: Table): Table {
  const out: Table = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] = isTable(b) && isTable(v) ? deepMerge(b, v) : v;
  }
  return out;
}
