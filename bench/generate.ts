// Writes one benchmark folder: the same graph three ways — a Nodefile.ts, a
// build.ninja and a Makefile — over N leaf files.
//
//   leaves/dNN/leafNNNNN.txt   N leaves, in folders of 1,000
//   leaves/dNN/header.h        one shared header per folder
//   obj/dNN/leafNNNNN.o        cp leaf → object (the header an extra input)   N tasks
//   lib/libNNN.a               cat of 100 objects                             N/100 tasks
//   out/all                    cat of every library                           1 task
//
// The output folders (obj/dNN, lib, out) are created here, for all three
// tools alike: make does not create them.
//
//   node bench/generate.ts N DIR

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const PER_FOLDER = 1000;
export const PER_LIB = 100;

export interface Layout {
  readonly n: number;
  readonly folders: number;
  readonly libs: number;
  readonly tasks: number;
}

export function layout(n: number): Layout {
  if (!Number.isInteger(n) || n < PER_LIB || n % PER_LIB !== 0) {
    throw new Error(`N must be a positive multiple of ${PER_LIB} (got ${n})`);
  }
  const libs = n / PER_LIB;
  return { n, folders: Math.ceil(n / PER_FOLDER), libs, tasks: n + libs + 1 };
}

export const folderName = (d: number): string => `d${String(d).padStart(2, '0')}`;
export const leafName = (i: number): string => `leaf${String(i).padStart(5, '0')}`;
export const libName = (l: number): string => `lib${String(l).padStart(3, '0')}`;
export const leafPath = (i: number): string => `leaves/${folderName(Math.floor(i / PER_FOLDER))}/${leafName(i)}.txt`;
export const headerPath = (d: number): string => `leaves/${folderName(d)}/header.h`;
export const objPath = (i: number): string => `obj/${folderName(Math.floor(i / PER_FOLDER))}/${leafName(i)}.o`;
export const libPath = (l: number): string => `lib/${libName(l)}.a`;
export const ALL = 'out/all';

/** The Nodefile, written as a user would: loops, a type-only import, no runtime dependency on nodegraph. */
export function nodefile(n: number): string {
  layout(n);
  return `// The benchmark graph (bench/generate.ts): ${n} leaves, cp per leaf, cat per ${PER_LIB} objects, cat over all.
import type { NodefileApi, TaskRef } from 'nodegraph';

const N = ${n};
const PER_FOLDER = ${PER_FOLDER};
const PER_LIB = ${PER_LIB};

const pad = (n: number, width: number): string => String(n).padStart(width, '0');
const folder = (i: number): string => 'd' + pad(Math.floor(i / PER_FOLDER), 2);

export default (ng: NodefileApi): void => {
  const libs: string[] = [];
  const libTasks: Record<string, TaskRef> = {};
  for (let l = 0; l < N / PER_LIB; l++) {
    const objs: string[] = [];
    const objTasks: Record<string, TaskRef> = {};
    for (let i = l * PER_LIB; i < (l + 1) * PER_LIB; i++) {
      const name = 'leaf' + pad(i, 5);
      const leaf = \`leaves/\${folder(i)}/\${name}.txt\`;
      const obj = \`obj/\${folder(i)}/\${name}.o\`;
      objTasks[name] = ng.task(\`cp/\${name}\`, {
        inputs: { leaf: ng.file(leaf), header: ng.file(\`leaves/\${folder(i)}/header.h\`) },
        outputs: [obj],
        run: ['cp', leaf, obj],
      });
      objs.push(obj);
    }
    const lib = \`lib/lib\${pad(l, 3)}.a\`;
    libTasks['lib' + pad(l, 3)] = ng.task(\`lib/lib\${pad(l, 3)}\`, {
      inputs: objTasks,
      outputs: [lib],
      // cat writes to stdout: a shell redirects it, as in ninja and make.
      run: { shell: \`cat \${objs.join(' ')} > \${lib}\` },
    });
    libs.push(lib);
  }
  ng.task('all', {
    inputs: libTasks,
    outputs: ['${ALL}'],
    run: { shell: \`cat \${libs.join(' ')} > ${ALL}\` },
  });
};
`;
}

export function ninjaFile(n: number): string {
  const { libs } = layout(n);
  const lines = [
    `# The benchmark graph (bench/generate.ts): ${n} leaves.`,
    'rule cp',
    '  command = cp $in $out',
    'rule cat',
    '  command = cat $in > $out',
    '',
  ];
  for (let i = 0; i < n; i++) {
    lines.push(`build ${objPath(i)}: cp ${leafPath(i)} | ${headerPath(Math.floor(i / PER_FOLDER))}`);
  }
  for (let l = 0; l < libs; l++) {
    const objs: string[] = [];
    for (let i = l * PER_LIB; i < (l + 1) * PER_LIB; i++) objs.push(objPath(i));
    lines.push(`build ${libPath(l)}: cat ${objs.join(' ')}`);
  }
  const all: string[] = [];
  for (let l = 0; l < libs; l++) all.push(libPath(l));
  lines.push(`build ${ALL}: cat ${all.join(' ')}`, `default ${ALL}`, '');
  return lines.join('\n');
}

export function makefile(n: number): string {
  const { libs } = layout(n);
  const all: string[] = [];
  for (let l = 0; l < libs; l++) all.push(libPath(l));
  const lines = [
    `# The benchmark graph (bench/generate.ts): ${n} leaves.`,
    'MAKEFLAGS += -rR',
    '.SUFFIXES:',
    '.PHONY: build',
    `build: ${ALL}`,
    '',
    `${ALL}: ${all.join(' ')}`,
    '\tcat $^ > $@',
    '',
  ];
  for (let l = 0; l < libs; l++) {
    const objs: string[] = [];
    for (let i = l * PER_LIB; i < (l + 1) * PER_LIB; i++) objs.push(objPath(i));
    lines.push(`${libPath(l)}: ${objs.join(' ')}`, '\tcat $^ > $@', '');
  }
  for (let i = 0; i < n; i++) {
    lines.push(`${objPath(i)}: ${leafPath(i)} ${headerPath(Math.floor(i / PER_FOLDER))}`, '\tcp $< $@', '');
  }
  return lines.join('\n');
}

export const leafContent = (i: number, variant = 0): string => `leaf ${i} v${variant}\n`;
export const headerContent = (d: number, variant = 0): string => `header ${d} v${variant}\n`;

/** Writes the sources, the three build descriptions and the (empty) output folders into `dir`. */
export function generate(n: number, dir: string): Layout {
  const shape = layout(n);
  for (let d = 0; d < shape.folders; d++) {
    mkdirSync(path.join(dir, 'leaves', folderName(d)), { recursive: true });
    mkdirSync(path.join(dir, 'obj', folderName(d)), { recursive: true });
    writeFileSync(path.join(dir, headerPath(d)), headerContent(d));
  }
  mkdirSync(path.join(dir, 'lib'), { recursive: true });
  mkdirSync(path.join(dir, 'out'), { recursive: true });
  for (let i = 0; i < n; i++) writeFileSync(path.join(dir, leafPath(i)), leafContent(i));
  writeFileSync(path.join(dir, 'Nodefile.ts'), nodefile(n));
  writeFileSync(path.join(dir, 'build.ninja'), ninjaFile(n));
  writeFileSync(path.join(dir, 'Makefile'), makefile(n));
  return shape;
}

/**
 * The smallest graph, one `cp` task, three ways: its no-op is what a tool costs before any
 * work that grows with the graph (the per-task cost is measured against it).
 */
export function generateOneTask(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'in.txt'), 'one\n');
  writeFileSync(
    path.join(dir, 'Nodefile.ts'),
    `// One task (bench/generate.ts).
import type { NodefileApi } from 'nodegraph';

export default (ng: NodefileApi): void => {
  ng.task('one', { inputs: { src: ng.file('in.txt') }, outputs: ['out.txt'], run: ['cp', 'in.txt', 'out.txt'] });
};
`,
  );
  writeFileSync(path.join(dir, 'build.ninja'), 'rule cp\n  command = cp $in $out\nbuild out.txt: cp in.txt\n');
  writeFileSync(path.join(dir, 'Makefile'), 'MAKEFLAGS += -rR\n.SUFFIXES:\nout.txt: in.txt\n\tcp $< $@\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [nArg, dirArg] = process.argv.slice(2);
  if (nArg === undefined || dirArg === undefined) {
    process.stderr.write('usage: node bench/generate.ts N DIR\n');
    process.exit(2);
  }
  const shape = generate(Number(nArg), path.resolve(dirArg));
  process.stdout.write(`${dirArg}: ${shape.n} leaves, ${shape.tasks} tasks\n`);
}
