// Reads a Nodefile: imports it (Node strips its types), calls its default
// export with a Builder, and turns every way that can go wrong into a Failure.

import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Failure } from '../error.ts';
import { err, ok, type Result } from '../util/result.ts';
import { Builder, type Declarations } from './builder.ts';
import { captureSiteFromError } from './site.ts';
import type { SourceSite } from './types.ts';

let generation = 0;

export async function loadNodefile(file: string, options: { sites?: boolean } = {}): Promise<Result<Declarations, Failure[]>> {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) return err([{ reason: 'nodefile-not-found', path: absolute }]);

  let module: { default?: unknown };
  try {
    // A fresh query string makes `watch` see edits; the first load keeps the plain URL.
    const url = pathToFileURL(absolute).href + (generation++ === 0 ? '' : `?g=${generation}`);
    module = (await import(url)) as { default?: unknown };
  } catch (error) {
    return err([classifyImportError(absolute, error)]);
  }
  if (typeof module.default !== 'function') return err([{ reason: 'nodefile-no-default', path: absolute }]);

  const builder = new Builder(absolute, path.dirname(absolute), options);
  try {
    await (module.default as (api: unknown) => unknown)(builder.api());
  } catch (error) {
    return err([threw(absolute, error)]);
  }
  await builder.check();
  const declarations = builder.declarations();
  return declarations.failures.length > 0 ? err([...declarations.failures]) : ok(declarations);
}

function classifyImportError(file: string, error: unknown): Failure {
  const code = (error as { code?: unknown } | null)?.code;
  if (
    error instanceof SyntaxError ||
    code === 'ERR_INVALID_TYPESCRIPT_SYNTAX' ||
    code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX'
  ) {
    return { reason: 'nodefile-syntax', path: file, message: firstLine(error), site: syntaxSite(error) };
  }
  return threw(file, error);
}

function threw(file: string, error: unknown): Failure {
  return {
    reason: 'nodefile-threw',
    path: file,
    message: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    site: error instanceof Error ? captureSiteFromError(error, file) : undefined,
  };
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.trim();
}

/** Node puts `file:line`, the source line and a caret above a syntax error's stack. */
function syntaxSite(error: unknown): SourceSite | undefined {
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  const match = /^(\/[^\n]*?):(\d+)\n/.exec(stack);
  if (match === null) return undefined;
  const caret = stack.split('\n').find((l) => /^\s*\^+\s*$/.test(l));
  return { file: match[1]!, line: Number(match[2]), column: caret === undefined ? 1 : caret.indexOf('^') + 1 };
}
