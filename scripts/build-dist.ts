// `npm pack` runs this before and after packing: bundle src/ into dist/lib/
// (Node will not strip types below node_modules, so an installed package needs
// JS) and emit its declarations into dist/types/, then remove dist/ again so a
// checkout keeps running its sources.
//
// A bundle, not one JS file per source file: Node's module loader costs a
// fraction of a millisecond per module (resolving, reading, linking), and a
// no-op loads some fifty of ours: bundled, it starts that much sooner. The
// dependencies stay packages of their own.
//
// Every file lands in dist/lib/, two folders below the package root as the
// sources are: the paths the code makes from import.meta.url (package.json,
// spawnd below the package root) hold in both.
//
//   node scripts/build-dist.ts [--out DIR] [--clean] [--without-types]
//
// --without-types: the bundle alone (the benchmark's snapshot of the engine,
// which has no tsconfig and needs no declarations).

import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { out: { type: 'string' }, clean: { type: 'boolean' }, 'without-types': { type: 'boolean' } } });
const out = path.resolve(values.out ?? path.join(root, 'dist'));
rmSync(out, { recursive: true, force: true });

/**
 * `import { x } from 'node:fs'` as `const { x } = process.getBuiltinModule('node:fs')`.
 * An ES import of a built-in builds its whole namespace, and node:fs's has getters
 * (`promises`, the stream classes) that load fs/promises, readline and the streams:
 * 34 of Node's own modules, about 5 % of a 1,000-task no-op's instructions, for
 * nothing it uses. The sources keep their imports; this is the bundle's business.
 */
const fsWithoutNamespace = {
  name: 'fs-without-namespace',
  renderChunk(code: string): string {
    const rewritten = code
      .replace(/^import \{([^}]*)\} from "node:fs";$/gm, (_, names: string) => `const {${names.replaceAll(' as ', ': ')}} = process.getBuiltinModule("node:fs");`)
      .replace(/^import (?:\* as )?(\w+) from "node:fs";$/gm, (_, name: string) => `const ${name} = process.getBuiltinModule("node:fs");`);
    if (/from "node:fs"|import\("node:fs"\)/.test(rewritten)) throw new Error('build-dist: an import of node:fs in a form fs-without-namespace does not rewrite');
    return rewritten;
  },
};

/** Refuses a chunk that is not ASCII (see `charset` below), naming it and its first other character. */
const asciiOnly = {
  name: 'ascii-only',
  generateBundle(_: unknown, bundle: Record<string, { type: string; fileName: string; code?: string }>): void {
    for (const chunk of Object.values(bundle)) {
      const at = chunk.code?.search(/[^\x00-\x7f]/) ?? -1;
      if (at >= 0) throw new Error(`build-dist: ${chunk.fileName} is not ASCII at offset ${at} (${JSON.stringify(chunk.code!.slice(Math.max(0, at - 20), at + 1))})`);
    }
  },
};

if (values.clean !== true) {
  const { build } = await import('rolldown');
  const pkg = (await import(path.join(root, 'package.json'), { with: { type: 'json' } })).default as { dependencies?: Record<string, string> };
  const dependencies = Object.keys(pkg.dependencies ?? {});
  const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
  await build({
    input: {
      'lib/index': path.join(root, 'src/index.ts'),
      'lib/library': path.join(root, 'src/library.ts'),
      'lib/main': path.join(root, 'src/cli/main.ts'),
    },
    platform: 'node',
    external: (id) => builtins.has(id) || id.startsWith('node:') || dependencies.some((d) => id === d || id.startsWith(`${d}/`)),
    logLevel: 'warn',
    plugins: [fsWithoutNamespace, asciiOnly],
    output: {
      dir: out,
      format: 'esm',
      entryFileNames: '[name].js',
      chunkFileNames: 'lib/[name]-[hash].js',
      // ASCII only (\uXXXX escapes), and no doc comments (src/ ships beside it): a source with one
      // other character is a two-byte string to V8, decoded and held at twice the size at every start.
      charset: 'ascii',
      comments: { jsdoc: false },
    },
  });
  // Declarations for a consumer's tsc (package.json's exports.types names them first). The
  // sources themselves would not do: their imports end in .ts, which a consumer's tsc refuses
  // (TS5097) below node_modules unless it allows importing .ts extensions; in a .d.ts it does not.
  const tsc = values['without-types'] === true ? undefined : spawnSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(root, 'tsconfig.types.json'), '--outDir', path.join(out, 'types')], {
    stdio: 'inherit',
  });
  if (tsc !== undefined && tsc.status !== 0) throw new Error(`build-dist: tsc could not emit the declarations (exit ${tsc.status ?? tsc.signal})`);
}
