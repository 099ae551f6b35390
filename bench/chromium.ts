// A Chromium-shaped graph, the shape of ninja's misc/write_fake_manifests.py
// (its own test of a large manifest), written three ways: a Nodefile.ts, a
// build.ninja with a subninja per target, and a Makefile. Every command is
// `touch $out` and every source an empty `.cc` file, so what is measured is
// the tool, not a compiler.
//
// The shape, by its default 1,500 targets: 1,499 static libraries and one
// executable. A target has a Pareto-distributed number of sources (28 at
// least, 56 on average, a long tail), each compiled to an object; four in ten
// have a stamp made from their first source, which all their objects depend
// on; a library depends on each earlier library with probability 1/20 (so a
// change low in the stack reaches most libraries), the executable on all of
// them. The names are made up from word lists, as the script does, by our own
// seeded generator: the same graph on every run.
//
//   node bench/chromium.ts DIR [TARGETS=1500] [SEED]

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const DEFAULT_TARGETS = 1500;
export const DEFAULT_SEED = 7;

export interface Target {
  readonly name: string;
  /** The target's folder below src/ and obj/, one or two words deep. */
  readonly dir: string;
  readonly kind: 'lib' | 'exe';
  /** Source stems: src/<dir>/<stem>.cc. */
  readonly sources: readonly string[];
  /** Whether its objects wait on a stamp made from its first source. */
  readonly stamp: boolean;
  /** Indices of the libraries it links (all earlier than itself). */
  readonly deps: readonly number[];
}

export interface ChromiumGraph {
  readonly targets: readonly Target[];
}

// ---- paths, shared by the three writers and the benchmark --------------------

export const sourcePath = (t: Target, stem: string): string => `src/${t.dir}/${stem}.cc`;
export const objectPath = (t: Target, stem: string): string => `obj/${t.dir}/${t.name}.${stem}.o`;
export const stampPath = (t: Target): string => `obj/${t.dir}/${t.name}.stamp`;
export const outputPath = (t: Target): string => (t.kind === 'lib' ? `lib${t.name}.a` : t.name);

// ---- the generator ---------------------------------------------------------------

/** mulberry32: small, seeded, good enough for picking names and counts. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const START = ['gpu', 'net', 'media', 'audio', 'input', 'page', 'frame', 'script', 'style', 'paint', 'cache', 'storage'];
const PART = [
  'view', 'host', 'client', 'bridge', 'impl', 'handle', 'observer', 'adapter', 'factory', 'proxy', 'stub', 'context', 'manager',
  'controller', 'monitor', 'service', 'source', 'data', 'buffer', 'device', 'info', 'provider', 'helper', 'tracker', 'api', 'layer',
];
const PLATFORM = ['win', 'mac', 'ozone', 'linux', 'android', 'unittest', 'browsertest', 'fuchsia'];

class Names {
  readonly #next: () => number;
  constructor(next: () => number) {
    this.#next = next;
  }

  /** An integer that is `mean` on average, from a Pareto distribution of shape `alpha` (> 1). */
  pareto(mean: number, alpha: number): number {
    const x = (1 - this.#next()) ** (-1 / alpha);
    return Math.floor((x * mean * (alpha - 1)) / alpha);
  }

  pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.#next() * list.length)]!;
  }

  chance(p: number): boolean {
    return this.#next() < p;
  }

  /** `gpu_host_proxy_linux`: a start word, up to five distinct parts, maybe a platform. */
  word(meanParts: number, pPlatform: number): string {
    const parts = [this.pick(START)];
    const pool = [...PART];
    for (let k = Math.min(this.pareto(meanParts, 4), 5); k > 0; k--) parts.push(pool.splice(Math.floor(this.#next() * pool.length), 1)[0]!);
    if (this.chance(pPlatform)) parts.push(this.pick(PLATFORM));
    return parts.join('_');
  }

  unique(seen: Set<string>, meanParts: number, pPlatform: number): string {
    for (;;) {
      const w = this.word(meanParts, pPlatform);
      if (!seen.has(w)) {
        seen.add(w);
        return w;
      }
    }
  }
}

/** The graph for `targets` targets (the last the executable) from `seed`. */
export function chromiumGraph(targets = DEFAULT_TARGETS, seed = DEFAULT_SEED): ChromiumGraph {
  if (!Number.isInteger(targets) || targets < 2) throw new Error(`targets must be a whole number of at least 2 (got ${targets})`);
  const names = new Names(random(seed));
  // Target names and folder names share one set, as in the script.
  const seen = new Set<string>();
  const make = (kind: Target['kind'], deps: number[]): Target => {
    const name = names.unique(seen, 1.3, 0);
    const depth = 1 + names.pareto(0.6, 4);
    const dir = Array.from({ length: depth }, () => names.unique(seen, 1, 0)).join('/');
    const stems = new Set<string>();
    const count = kind === 'exe' ? 10 : names.pareto(55, 2) + 1;
    const sources = Array.from({ length: count }, () => names.unique(stems, 3, 0.4));
    return { name, dir, kind, sources, stamp: names.chance(0.4), deps };
  };
  const list: Target[] = [];
  for (let i = 0; i < targets - 1; i++) {
    const deps: number[] = [];
    for (let j = 0; j < i; j++) if (names.chance(0.05)) deps.push(j);
    list.push(make('lib', deps));
  }
  list.push(make('exe', list.map((_, j) => j)));
  return { targets: list };
}

export interface ChromiumShape {
  readonly targets: number;
  readonly sources: number;
  readonly stamps: number;
  /** Commands in a full build: objects, stamps, libraries and the executable (ninja's edges but its phony ones). */
  readonly tasks: number;
}

export function shapeOf(graph: ChromiumGraph): ChromiumShape {
  let sources = 0;
  let stamps = 0;
  for (const t of graph.targets) {
    sources += t.sources.length;
    if (t.stamp) stamps++;
  }
  return { targets: graph.targets.length, sources, stamps, tasks: sources + stamps + graph.targets.length };
}

/**
 * The source the benchmark changes: the last of the first library's, not a stamp's input, so
 * that one object is stale. How many commands ninja and make then run: that object, its library
 * and every target that links it, directly or through another library.
 */
export function changedSource(graph: ChromiumGraph): { path: string; downstream: number } {
  const first = graph.targets[0]!;
  const reached = new Set<number>([0]);
  graph.targets.forEach((t, i) => {
    if (t.deps.some((d) => reached.has(d))) reached.add(i);
  });
  return { path: sourcePath(first, first.sources.at(-1)!), downstream: 1 + reached.size };
}

// ---- the three descriptions ------------------------------------------------------

/** The Nodefile, as a user would write it over a list of targets: loops, a type-only import. */
export function nodefile(): string {
  return `// The Chromium-shaped graph (bench/chromium.ts): every target in targets.json, every command \`touch\`.
import { readFileSync } from 'node:fs';
import type { NodefileApi, TaskRef } from 'nodegraph';

interface Target {
  name: string;
  dir: string;
  kind: 'lib' | 'exe';
  sources: string[];
  stamp: boolean;
  deps: number[];
}

export default (ng: NodefileApi): void => {
  const { targets } = JSON.parse(readFileSync(\`\${ng.dir}/targets.json\`, 'utf8')) as { targets: Target[] };
  const links: TaskRef[] = [];
  const outputs: string[] = [];
  for (const t of targets) {
    let stamp: TaskRef | undefined;
    if (t.stamp) {
      const out = \`obj/\${t.dir}/\${t.name}.stamp\`;
      stamp = ng.task(\`stamp/\${t.dir}/\${t.name}\`, {
        inputs: { src: ng.file(\`src/\${t.dir}/\${t.sources[0]}.cc\`) },
        outputs: [out],
        run: ['touch', out],
      });
    }
    const inputs: Record<string, TaskRef> = {};
    for (const s of t.sources) {
      const obj = \`obj/\${t.dir}/\${t.name}.\${s}.o\`;
      const src = ng.file(\`src/\${t.dir}/\${s}.cc\`);
      inputs[s] = ng.task(\`cxx/\${t.dir}/\${t.name}.\${s}\`, {
        inputs: stamp === undefined ? { src } : { src, stamp },
        outputs: [obj],
        run: ['touch', obj],
      });
    }
    for (const d of t.deps) inputs[outputs[d]!] = links[d]!;
    const out = t.kind === 'lib' ? \`lib\${t.name}.a\` : t.name;
    links.push(ng.task(\`link/\${t.name}\`, { inputs, outputs: [out], run: ['touch', out] }));
    outputs.push(out);
  }
};
`;
}

/** build.ninja and one subninja per target, as the script writes them, with `touch $out` for every rule. */
export function ninjaFiles(graph: ChromiumGraph): Map<string, string> {
  const files = new Map<string, string>();
  const top = ['# The Chromium-shaped graph (bench/chromium.ts).', 'rule touch', '  command = touch $out', ''];
  for (const t of graph.targets) {
    const lines: string[] = [];
    const implicit = t.stamp ? ` | ${stampPath(t)}` : '';
    if (t.stamp) lines.push(`build ${stampPath(t)}: touch ${sourcePath(t, t.sources[0]!)}`);
    for (const s of t.sources) lines.push(`build ${objectPath(t, s)}: touch ${sourcePath(t, s)}${implicit}`);
    const deps = t.deps.map((d) => outputPath(graph.targets[d]!));
    lines.push(`build ${outputPath(t)}: touch ${t.sources.map((s) => objectPath(t, s)).join(' ')}${deps.length > 0 ? ` | ${deps.join(' ')}` : ''}`, '');
    const file = `obj/${t.dir}/${t.name}.ninja`;
    files.set(file, lines.join('\n'));
    top.push(`subninja ${file}`);
  }
  top.push('');
  for (const t of graph.targets) if (t.name !== outputPath(t)) top.push(`build ${t.name}: phony ${outputPath(t)}`);
  top.push(`build all: phony ${graph.targets.map(outputPath).join(' ')}`, 'default all', '');
  files.set('build.ninja', top.join('\n'));
  return files;
}

export function makefile(graph: ChromiumGraph): string {
  const lines = [
    '# The Chromium-shaped graph (bench/chromium.ts).',
    'MAKEFLAGS += -rR',
    '.SUFFIXES:',
    `.PHONY: all ${graph.targets.filter((t) => t.name !== outputPath(t)).map((t) => t.name).join(' ')}`,
    `all: ${graph.targets.map(outputPath).join(' ')}`,
    '',
  ];
  for (const t of graph.targets) {
    if (t.name !== outputPath(t)) lines.push(`${t.name}: ${outputPath(t)}`);
    const implicit = t.stamp ? ` ${stampPath(t)}` : '';
    if (t.stamp) lines.push(`${stampPath(t)}: ${sourcePath(t, t.sources[0]!)}`, '\ttouch $@');
    for (const s of t.sources) lines.push(`${objectPath(t, s)}: ${sourcePath(t, s)}${implicit}`, '\ttouch $@');
    const deps = t.deps.map((d) => ` ${outputPath(graph.targets[d]!)}`).join('');
    lines.push(`${outputPath(t)}: ${t.sources.map((s) => objectPath(t, s)).join(' ')}${deps}`, '\ttouch $@', '');
  }
  return lines.join('\n');
}

/** Writes the empty sources, the object folders (make creates none) and the three descriptions into `dir`. */
export function generateChromium(dir: string, graph: ChromiumGraph): ChromiumShape {
  for (const t of graph.targets) {
    mkdirSync(path.join(dir, 'src', t.dir), { recursive: true });
    mkdirSync(path.join(dir, 'obj', t.dir), { recursive: true });
    for (const s of t.sources) writeFileSync(path.join(dir, sourcePath(t, s)), '');
  }
  writeFileSync(path.join(dir, 'targets.json'), JSON.stringify(graph));
  writeFileSync(path.join(dir, 'Nodefile.ts'), nodefile());
  for (const [file, text] of ninjaFiles(graph)) writeFileSync(path.join(dir, file), text);
  writeFileSync(path.join(dir, 'Makefile'), makefile(graph));
  return shapeOf(graph);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [dirArg, targetsArg, seedArg] = process.argv.slice(2);
  if (dirArg === undefined) {
    process.stderr.write('usage: node bench/chromium.ts DIR [TARGETS=1500] [SEED]\n');
    process.exit(2);
  }
  const graph = chromiumGraph(targetsArg === undefined ? DEFAULT_TARGETS : Number(targetsArg), seedArg === undefined ? DEFAULT_SEED : Number(seedArg));
  const shape = generateChromium(path.resolve(dirArg), graph);
  const changed = changedSource(graph);
  process.stdout.write(
    `${dirArg}: ${shape.targets} targets, ${shape.sources} sources, ${shape.stamps} stamps, ${shape.tasks} commands; ` +
      `changing ${changed.path} re-runs ${changed.downstream} of them in ninja and make\n`,
  );
}
