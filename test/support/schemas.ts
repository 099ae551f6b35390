// The JSON Schemas the package ships (schemas/), loaded into ajv, for tests that validate real output.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { expect } from 'vitest';
import { repo } from './rig.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
export const ajv = addFormats(new Ajv({ allErrors: true, strict: true }));
export const schemaDir = path.join(repo, 'schemas');
for (const file of readdirSync(schemaDir)) ajv.addSchema(JSON.parse(readFileSync(path.join(schemaDir, file), 'utf8')) as object);

export const schema = (name: string): ValidateFunction => ajv.getSchema(`${name}.schema.json`)!;

/** Asserts `value` is valid against `<name>.schema.json`, saying why not. */
export function valid(name: string, value: unknown): void {
  const check = schema(name);
  expect(check(value), `${name}: ${ajv.errorsText(check.errors)}\n${JSON.stringify(value)}`).toBe(true);
}
