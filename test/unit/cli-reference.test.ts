// The README's command reference and the help text say the same: the same
// commands, the same exit codes, and every option of a command named in both.
// A command added to both (help.ts and the table) keeps this passing.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { COMMANDS, ENV, EXIT_CODES, commandHelp, mainHelp, type CommandName } from '../../src/cli/help.ts';
import { optionsFor } from '../../src/cli/help.ts';
import { repo } from '../support/rig.ts';

const COMMON = new Set(['file', 'state-dir', 'json', 'help']);

/** The rows of the README's command table: command → [what it does, exit codes]. */
function readmeRows(): Map<string, { what: string; exits: string }> {
  const text = readFileSync(path.join(repo, 'README.md'), 'utf8');
  const table = text.slice(text.indexOf('| command | what it does | exit codes |'));
  const rows = new Map<string, { what: string; exits: string }>();
  for (const line of table.split('\n').slice(2)) {
    if (!line.startsWith('| `')) break;
    // Cells split on pipes that are not escaped (`\|` inside a cell).
    const cells = line.split(/(?<!\\)\|/).map((c) => c.trim());
    const name = /^`([a-z]+)/.exec(cells[1]!)![1]!;
    rows.set(name, { what: cells[2]!, exits: cells[3]!.replaceAll('`', '') });
  }
  return rows;
}

const longOptions = (name: CommandName): string[] => Object.keys(optionsFor[name]).filter((o) => !COMMON.has(o));

test('the README lists the commands the help lists, in the same order', () => {
  expect([...readmeRows().keys()]).toEqual([...COMMANDS]);
  for (const name of COMMANDS) expect(mainHelp()).toMatch(new RegExp(`^  ${name} `, 'm'));
});

test.each(COMMANDS.map((name) => [name]))('%s: the same exit codes and options in the README and in its help', (name) => {
  const row = readmeRows().get(name)!;
  expect(row.exits).toBe(EXIT_CODES[name]);
  expect(commandHelp(name)).toContain(`\nExit codes: ${EXIT_CODES[name]}.\n`);
  for (const option of longOptions(name)) {
    const { short } = optionsFor[name][option]!;
    // The README names an option by its short form where it has one (`-j N`), as the help shows both.
    expect(row.what.includes(`--${option}`) || (short !== undefined && row.what.includes(`\`-${short}`))).toBe(true);
    expect(commandHelp(name)).toContain(`--${option}`);
  }
  for (const [, option] of row.what.matchAll(/`--([a-z-]+)/g)) expect([...Object.keys(optionsFor[name]), ...COMMON]).toContain(option);
});

/** Read by the engine for its crash tests only (util/failpoint.ts): not for users. */
const TEST_HOOKS = new Set(['NODEGRAPH_FAILPOINT']);

test("every environment variable nodegraph's own code reads is in the help of a command that reads it", () => {
  const read = new Set<string>();
  const src = path.join(repo, 'src');
  for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
    // The node kit's modules run inside tasks, with the task's environment, not nodegraph's.
    if (!file.endsWith('.ts') || file.startsWith('node/')) continue;
    const text = readFileSync(path.join(src, file), 'utf8');
    for (const [, bracket, dot] of text.matchAll(/(?:process\.env|\benv)(?:\[['"]([A-Z_]+)['"]\]|\.([A-Z_]+)\b)/g)) read.add((bracket ?? dot)!);
  }
  expect(read.size).toBeGreaterThan(3);
  const documented = new Set(Object.values(ENV).flat());
  for (const name of read) if (!TEST_HOOKS.has(name)) expect(documented, name).toContain(name);
  for (const name of COMMANDS) for (const v of ENV[name]) expect(commandHelp(name)).toMatch(new RegExp(`^  ${v} +\\S`, 'm'));
});
