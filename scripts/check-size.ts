// Sizes a reader can hold (issue "a house a newcomer can read in an hour"):
// no function in src/ or graphs/ longer than MAX_FUNCTION lines, no file longer
// than MAX_FILE. A function's length runs from the line it starts on to the line
// it ends on, nested functions included. `node scripts/check-size.ts` prints
// every breach; test/unit/size.test.ts keeps the list empty.
//
// The parser is oxc's, through rolldown (a dev dependency already): it parses
// TypeScript in this process, where the TypeScript 7 API would start a server.

import path from 'node:path';
import { parseAst } from 'rolldown/parseAst';
import { readSources } from './check-imports.ts';

export const MAX_FUNCTION = 120;
export const MAX_FILE = 500;

/**
 * Breaches that work under way elsewhere removes, each as `file` or `file: name`;
 * `node scripts/check-size.ts` names those no longer found.
 */
export const KNOWN: readonly string[] = [];

export interface Sized {
  readonly file: string;
  /** The function's name as a reader finds it: `f`, `Class.method`, `outer > inner`; '' for the file itself. */
  readonly name: string;
  readonly line: number;
  readonly lines: number;
}

interface Node {
  readonly type: string;
  readonly start: number;
  readonly end: number;
  readonly [key: string]: unknown;
}

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string';

/** The name a key or binding gives the function it holds, or undefined. */
function nameOf(node: unknown): string | undefined {
  if (!isNode(node)) return undefined;
  if (node.type === 'Identifier' || node.type === 'PrivateIdentifier') return String(node.name);
  if (node.type === 'Literal') return String(node.value);
  return undefined;
}

/** Every function of one file with its length in lines; the file itself comes first, named ''. */
export function sizesOf(file: string, text: string): Sized[] {
  const lineStarts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const lineAt = (offset: number): number => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
  const lines = text.endsWith('\n') ? lineStarts.length - 1 : lineStarts.length;
  const found: Sized[] = [{ file, name: '', line: 1, lines }];
  // UTF-16 offsets: oxc reports them so for JavaScript callers.
  const program = parseAst(text, { lang: 'ts' }, file) as unknown as Node;

  // `hint` is the name the parent binds the node to: `const f = …`, `{ f: … }`, `f() {}`.
  const visit = (node: Node, scope: string, hint: string | undefined): void => {
    let inner = scope;
    if (FUNCTIONS.has(node.type)) {
      const own = nameOf(node.id) ?? hint ?? '(anonymous)';
      inner = scope === '' ? own : `${scope} > ${own}`;
      const first = lineAt(node.start);
      found.push({ file, name: inner, line: first, lines: lineAt(Math.max(node.start, node.end - 1)) - first + 1 });
    } else if (node.type === 'ClassDeclaration' || node.type === 'ClassExpression') {
      const own = nameOf(node.id) ?? hint ?? '(class)';
      inner = scope === '' ? own : `${scope} > ${own}`;
    }
    for (const [key, value] of Object.entries(node)) {
      for (const child of Array.isArray(value) ? value : [value]) {
        if (isNode(child)) visit(child, inner, hintFor(node, key, hint));
      }
    }
  };
  visit(program, '', undefined);
  return found;
}

/** The name `node` gives its child under `key`; calls and casts pass their own on: `const f = memo((x) => …)`. */
function hintFor(node: Node, key: string, hint: string | undefined): string | undefined {
  switch (node.type) {
    case 'VariableDeclarator':
      return key === 'init' ? nameOf(node.id) : undefined;
    case 'Property':
    case 'PropertyDefinition':
    case 'MethodDefinition':
      return key === 'value' ? nameOf(node.key) : undefined;
    case 'AssignmentExpression':
      return key === 'right' ? (nameOf(node.left) ?? nameOf((node.left as Node).property)) : undefined;
    case 'ExportDefaultDeclaration':
      return 'default';
    case 'CallExpression':
    case 'TSAsExpression':
    case 'TSSatisfiesExpression':
    case 'ParenthesizedExpression':
      return key === 'callee' ? undefined : hint;
    default:
      return undefined;
  }
}

/** Every function over MAX_FUNCTION lines and every file over MAX_FILE, one line each; `known` is left out. */
export function breaches(sources: ReadonlyMap<string, string>, known: readonly string[] = KNOWN): { found: string[]; stale: string[] } {
  const stale = new Set(known);
  const found: string[] = [];
  for (const [file, text] of sources) {
    for (const s of sizesOf(file, text)) {
      const max = s.name === '' ? MAX_FILE : MAX_FUNCTION;
      if (s.lines <= max) continue;
      const key = s.name === '' ? file : `${file}: ${s.name}`;
      if (stale.delete(key) || known.includes(key)) continue;
      found.push(s.name === '' ? `${file}: ${s.lines} lines, over ${max}` : `${file}:${s.line}: ${s.name}: ${s.lines} lines, over ${max}`);
    }
  }
  return { found: found.sort(), stale: [...stale] };
}

if (import.meta.main) {
  const { found, stale } = breaches(readSources(path.join(import.meta.dirname, '..')));
  for (const line of found) console.log(line);
  for (const line of stale) console.log(`no longer found, take it off KNOWN: ${line}`);
  process.exitCode = found.length === 0 ? 0 : 1;
}
