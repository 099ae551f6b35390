// systemd units and drop-ins rendered from a typed object. Sections and keys
// keep their order; a list value writes the key once per item, so
// `ExecStart: ['', '/usr/bin/kubelet …']` resets ExecStart before setting it.

import { z } from 'zod';
import { err, ok, type Result } from '../util/result.ts';

const sectionName = z.string().regex(/^[A-Za-z][A-Za-z0-9-]*$/, 'a section name is letters, digits and dashes');
const key = z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/, 'a key is letters and digits');
const value = z.union([z.string(), z.number(), z.boolean()]).refine((v) => !String(v).includes('\n'), 'a value must be one line');
const values = z.union([value, z.array(value)]);

export const unitSchema = z.record(sectionName, z.record(key, values));

/** `{ Unit: { Description: 'x' }, Service: { ExecStart: ['', '/bin/true'] } }` */
export type Unit = z.infer<typeof unitSchema>;

export function validateUnit(unit: unknown): Result<Unit, string[]> {
  const parsed = unitSchema.safeParse(unit);
  if (parsed.success) return ok(parsed.data);
  return err(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
}

const formatValue = (v: string | number | boolean): string => (typeof v === 'boolean' ? (v ? 'yes' : 'no') : String(v));

export function renderUnit(unit: Unit, header?: string): string {
  const checked = validateUnit(unit);
  if (!checked.ok) throw new Error(`invalid systemd unit: ${checked.error.join('; ')}`);
  const lines: string[] = [];
  if (header !== undefined) for (const line of header.split('\n')) lines.push(`# ${line}`.trimEnd());
  for (const [section, entries] of Object.entries(checked.value)) {
    if (lines.length > 0) lines.push('');
    lines.push(`[${section}]`);
    for (const [k, v] of Object.entries(entries)) {
      for (const one of Array.isArray(v) ? v : [v]) lines.push(`${k}=${formatValue(one)}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Quotes one literal word for an Exec line the way systemd splits it: `%`
 * (specifiers) and `$` (variables) are doubled so they stay literal.
 */
export function quoteWord(word: string): string {
  const literal = word.replaceAll('%', '%%').replaceAll('$', () => '$$');
  if (literal !== '' && /^[A-Za-z0-9_@%$+=:,./-]+$/.test(literal)) return literal;
  return `"${literal.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

export const execLine = (argv: readonly string[]): string => argv.map(quoteWord).join(' ');

/** The drop-in path of a unit: `/etc/systemd/system/kubelet.service.d/10-nodegraph.conf`. */
export const dropInPath = (unitName: string, name: string, dir = '/etc/systemd/system'): string =>
  `${dir}/${unitName}.d/${name}.conf`;
