// TOML in and out: the one smol-toml import.

import { parse, stringify } from 'smol-toml';

export type TomlTable = Record<string, unknown>;

export const toToml = (table: TomlTable): string => `${stringify(table)}\n`;
export const fromToml = (text: string): TomlTable => parse(text) as TomlTable;
