// Bad input: one clear error with what and where, a non-zero exit, and
// nothing lost — the state and every output exactly as they were.

import { readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { COMMANDS } from '../../src/cli/help.ts';
import { apiTypes, Rig } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

const header = `import type { NodefileApi } from ${JSON.stringify(apiTypes)};\nexport default (ng: NodefileApi) => {\n`;

/** Every file below the rig (but the Nodefile), with its bytes and mtime. */
function snapshot(): Map<string, string> {
  const seen = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name !== 'Nodefile.ts' && entry.name !== 'hashcache') {
        seen.set(path.relative(rig.dir, full), `${readFileSync(full, 'base64')} ${statSync(full).mtimeMs}`);
      }
    }
  };
  walk(rig.dir);
  return seen;
}

const cases: { name: string; body: string; expected: (file: string) => string }[] = [
  {
    name: 'a cycle names every edge of the loop',
    body: `  ng.task('a', { inputs: { c: ng.ref('c') }, run: ['true'] });
  ng.task('b', { inputs: { a: ng.ref('a') }, run: ['true'] });
  ng.task('c', { after: ['b'], run: ['true'] });
`,
    expected: (f) => `error[cycle]: the graph has a cycle of 3 edges:
  a → b  (b consumes a, ${f}:4:6)
  b → c  (c runs after b, ${f}:5:6)
  c → a  (a consumes c, ${f}:3:6)
`,
  },
  {
    name: 'a duplicate id names both declarations',
    body: `  ng.task('a', { run: ['true'] });
  ng.task('a', { run: ['false'] });
`,
    expected: (f) => `error[duplicate-task]: task a is declared twice: first at ${f}:3:6, again at ${f}:4:6
 --> ${f}:4:6
  |
4 |   ng.task('a', { run: ['false'] });
  |      ^
`,
  },
  {
    name: 'a pool declared twice is refused, as ninja refuses it',
    body: `  ng.pool('link', 1);
  ng.pool('link', 3);
`,
    expected: (f) => `error[invalid-field]: pool link: declared twice (depth 1, then 3)
 --> ${f}:4:6
  |
4 |   ng.pool('link', 3);
  |      ^
`,
  },
  {
    name: 'a preserved path inside an output of the same graph is refused where it is declared',
    body: `  ng.task('a', { outputs: ['out/a'], run: ['true'] });
  ng.preserve('out/a/identity');
`,
    expected: (f) => `error[invalid-field]: preserve: out/a/identity is inside out/a, an output of a: a task's outputs are its own to roll back
 --> ${f}:4:6
  |
4 |   ng.preserve('out/a/identity');
  |      ^
`,
  },
  {
    name: 'a task id is not a path: a segment "." or ".." is refused',
    body: `  ng.task('kube1/../kube2', { run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task kube1/../kube2: field id: a task id is words of [A-Za-z0-9_.:@+-] joined by "/", none of them "." or "..", e.g. kube1/containerd.config
 --> ${f}:3:6
  |
3 |   ng.task('kube1/../kube2', { run: ['true'] });
  |      ^
`,
  },
  {
    name: 'an empty list of stop or destroy commands is refused, as an empty check is',
    body: `  ng.task('svc', { run: ['true'], stop: [], destroy: [] });
`,
    expected: (f) => `error[invalid-field]: task svc: field stop: an empty list runs nothing: give at least one command, or leave stop out
 --> ${f}:3:6
  |
3 |   ng.task('svc', { run: ['true'], stop: [], destroy: [] });
  |      ^
error[invalid-field]: task svc: field destroy: an empty list runs nothing: give at least one command, or leave destroy out
 --> ${f}:3:6
  |
3 |   ng.task('svc', { run: ['true'], stop: [], destroy: [] });
  |      ^
`,
  },
  {
    name: 'a preserved path that overlaps the state folder is refused',
    body: `  ng.preserve('.nodegraph/lock');
`,
    expected: (f) => `error[invalid-field]: preserve: .nodegraph/lock overlaps nodegraph's state folder .nodegraph
 --> ${f}:3:6
  |
3 |   ng.preserve('.nodegraph/lock');
  |      ^
`,
  },
  {
    name: 'settings are checked',
    body: `  ng.settings({ atomic: 'yes' });
`,
    expected: (f) => `error[invalid-field]: settings.atomic: true, false or 'always', not "yes"
 --> ${f}:3:6
  |
3 |   ng.settings({ atomic: 'yes' });
  |      ^
`,
  },
  {
    name: 'a health task needs a check, and durations a unit',
    body: `  ng.task('h', { run: ['true'], health: { within: '10s' } });
  ng.task('i', { run: ['true'], check: ['true'], health: { within: 'soon' } });
`,
    expected: (f) => `error[invalid-field]: task h: field health: a health task needs a check: health is that check passing
 --> ${f}:3:6
  |
3 |   ng.task('h', { run: ['true'], health: { within: '10s' } });
  |      ^
error[invalid-field]: task i: field health.within: a duration is a number and a unit: '500ms', '10s', '2m' or '1h'
 --> ${f}:4:6
  |
4 |   ng.task('i', { run: ['true'], check: ['true'], health: { within: 'soon' } });
  |      ^
`,
  },
  {
    name: 'a timeout is a duration longer than none',
    body: `  ng.task('t', { run: ['true'], timeout: '0s' });
  ng.task('u', { run: ['true'], timeout: 30 });
`,
    expected: (f) => `error[invalid-field]: task t: field timeout: a timeout is a duration longer than none: '500ms', '30s', '5m' or '1h'
 --> ${f}:3:6
  |
3 |   ng.task('t', { run: ['true'], timeout: '0s' });
  |      ^
error[invalid-field]: task u: field timeout: a timeout is a duration longer than none: '500ms', '30s', '5m' or '1h'
 --> ${f}:4:6
  |
4 |   ng.task('u', { run: ['true'], timeout: 30 });
  |      ^
`,
  },
  {
    name: 'a verb for an upstream the task does not consume is a typo, and says so',
    body: `  const a = ng.task('a', { run: ['true'] });
  ng.task('b', { inputs: { a }, run: ['true'], verbs: { upstream: { aa: 'start' } } });
`,
    expected: (f) => `error[invalid-field]: task b: field verbs.upstream.aa: b consumes no task aa
 --> ${f}:4:6
  |
4 |   ng.task('b', { inputs: { a }, run: ['true'], verbs: { upstream: { aa: 'start' } } });
  |      ^
`,
  },
  {
    name: 'a run that is neither a command nor a function says what it may be',
    body: `  ng.task('a', { run: ['sleep', 1] });
`,
    expected: (f) => `error[invalid-field]: task a: field run: expected an argv of strings (["cp", "a", "b"]), { shell: "…" } or a function
 --> ${f}:3:6
  |
3 |   ng.task('a', { run: ['sleep', 1] });
  |      ^
`,
  },
  {
    name: 'an output() that names no output of its task says which outputs there are',
    body: `  const a = ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });
  ng.task('b', { inputs: { x: a.output('out/typo') }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task b: field inputs.x: out/typo is not an output of a (it declares out/a)
 --> ${f}:4:6
  |
4 |   ng.task('b', { inputs: { x: a.output('out/typo') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'an unknown reference names the task, the field and the missing id',
    body: `  ng.task('a', { inputs: { x: ng.ref('nope') }, run: ['true'] });
`,
    expected: (f) => `error[unknown-task]: task a: inputs.x refers to unknown task nope
 --> ${f}:3:6
  |
3 |   ng.task('a', { inputs: { x: ng.ref('nope') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: "an invalid field gives zod's message with the task id and file:line",
    body: `  ng.task('kube1/containerd.config', {
    outputs: 'config.toml' as unknown as string[],
    run: ['true'],
  });
`,
    expected: (f) => `error[invalid-field]: task kube1/containerd.config: field outputs: Invalid input: expected array, received string
 --> ${f}:3:6
  |
3 |   ng.task('kube1/containerd.config', {
  |      ^
`,
  },
  {
    name: 'a Nodefile that throws points at the throwing line',
    body: `  const settings = undefined as unknown as { name: string };
  ng.task('a', { run: ['echo', settings.name] });
`,
    expected: (f) => `error[nodefile-threw]: the Nodefile threw while declaring the graph: TypeError: Cannot read properties of undefined (reading 'name')
 --> ${f}:4:41
  |
4 |   ng.task('a', { run: ['echo', settings.name] });
  |                                         ^
`,
  },
  {
    name: 'a Nodefile that fails to type-strip',
    body: `  ng.task('a', { run: ['true'] }
`,
    expected: (f) => `error[nodefile-syntax]: the Nodefile could not be loaded as TypeScript: Expected ',', got '}'
 --> ${f}:4:1
  |
4 | };
  | ^
`,
  },
  {
    name: 'a missing input file',
    body: `  ng.task('a', { inputs: { src: ng.file('does/not/exist.txt') }, run: ['true'] });
`,
    expected: (f) => `error[missing-input]: task a: input src: does/not/exist.txt does not exist and no task declares it as an output
 --> ${f}:3:6
  |
3 |   ng.task('a', { inputs: { src: ng.file('does/not/exist.txt') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'a missing input file outside the working folder is named whole, not by a climb of ../',
    body: `  ng.task('a', { inputs: { img: ng.file('/nodegraph-test-nowhere/os.img') }, run: ['true'] });
`,
    expected: (f) => `error[missing-input]: task a: input img: /nodegraph-test-nowhere/os.img does not exist and no task declares it as an output
 --> ${f}:3:6
  |
3 |   ng.task('a', { inputs: { img: ng.file('/nodegraph-test-nowhere/os.img') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'a value that is not JSON names the input, the path within the value, and what to write instead',
    body: `  class Point { x = 1; }
  ng.task('a', { inputs: { v: ng.value({ when: new Date(0) } as never) }, run: ['true'] });
  ng.task('b', { inputs: { v: ng.value({ list: [1, 2n] } as never) }, run: ['true'] });
  ng.task('c', { inputs: { v: ng.value({ 'a ratio': NaN }) }, run: ['true'] });
  ng.task('d', { inputs: { v: ng.value({ make: () => 1 } as never) }, run: ['true'] });
  ng.task('e', { inputs: { v: ng.value(new Point() as never) }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task a: field inputs.v.value.when: a Date is not JSON; use its toISOString()
 --> ${f}:4:6
  |
4 |   ng.task('a', { inputs: { v: ng.value({ when: new Date(0) } as never) }, run: ['true'] });
  |      ^
error[invalid-field]: task b: field inputs.v.value.list[1]: a BigInt is not JSON; use a number, or a string (its toString())
 --> ${f}:5:6
  |
5 |   ng.task('b', { inputs: { v: ng.value({ list: [1, 2n] } as never) }, run: ['true'] });
  |      ^
error[invalid-field]: task c: field inputs.v.value["a ratio"]: NaN is not JSON; use null or a finite number
 --> ${f}:6:6
  |
6 |   ng.task('c', { inputs: { v: ng.value({ 'a ratio': NaN }) }, run: ['true'] });
  |      ^
error[invalid-field]: task d: field inputs.v.value.make: a function is not JSON; use the value it returns
 --> ${f}:7:6
  |
7 |   ng.task('d', { inputs: { v: ng.value({ make: () => 1 } as never) }, run: ['true'] });
  |      ^
error[invalid-field]: task e: field inputs.v.value: a Point is not JSON; use a plain object of its fields
 --> ${f}:8:6
  |
8 |   ng.task('e', { inputs: { v: ng.value(new Point() as never) }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'a value that contains itself, or is nested a thousand deep, is refused where it is declared, not met while hashing',
    body: `  const loop: Record<string, unknown> = { a: 1 };
  loop['self'] = loop;
  ng.task('a', { inputs: { v: ng.value(loop as never) }, run: ['true'] });
  let deep: unknown = 1;
  for (let i = 0; i < 2000; i++) deep = [deep];
  ng.task('b', { inputs: { v: ng.value(deep as never) }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task a: field inputs.v.value.self: the value contains itself, which JSON cannot
 --> ${f}:5:6
  |
5 |   ng.task('a', { inputs: { v: ng.value(loop as never) }, run: ['true'] });
  |      ^
error[invalid-field]: task b: field inputs.v.value: it is nested deeper than 1000 levels
 --> ${f}:8:6
  |
8 |   ng.task('b', { inputs: { v: ng.value(deep as never) }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'a Nodefile that calls process.exit does not end the run with a silent exit 0: it is an error where it called it',
    body: `  ng.task('a', { run: ['true'] });
  process.exit(0);
`,
    expected: (f) => `error[nodefile-threw]: the Nodefile threw while declaring the graph: Error: process.exit(0) was called: nodegraph ends its own run, and this code cannot end it
 --> ${f}:4:11
  |
4 |   process.exit(0);
  |           ^
`,
  },
  {
    name: 'an empty program name, an empty argv, and an environment name a command cannot hold, are refused where declared, not met at run time',
    body: `  ng.task('a', { run: [''] });
  ng.task('b', { run: ['true'], env: { 'A=B': 'x' } });
  ng.task('c', { run: [] });
`,
    expected: (f) => `error[invalid-field]: task a: field run: the program name is empty
 --> ${f}:3:6
  |
3 |   ng.task('a', { run: [''] });
  |      ^
error[invalid-field]: task b: field env["A=B"]: an environment name is not empty and holds no =
 --> ${f}:4:6
  |
4 |   ng.task('b', { run: ['true'], env: { 'A=B': 'x' } });
  |      ^
error[invalid-field]: task c: field run: a command needs at least the program name
 --> ${f}:5:6
  |
5 |   ng.task('c', { run: [] });
  |      ^
`,
  },
  {
    name: 'an output declared twice by one task says so, not that the task collides with itself',
    body: `  ng.task('a', { run: ['true'], outputs: ['x', 'x'] });
`,
    expected: (f) => `error[duplicate-output]: task a declares output x twice
 --> ${f}:3:6
  |
3 |   ng.task('a', { run: ['true'], outputs: ['x', 'x'] });
  |      ^
`,
  },
  {
    name: 'a verb the plan would show as a blank is refused where it is declared',
    body: `  ng.task('a', { run: ['true'], verbs: { create: '' } });
`,
    expected: (f) => `error[invalid-field]: task a: field verbs.create: a verb is what the plan shows (start, leave in containerd): words on one line
 --> ${f}:3:6
  |
3 |   ng.task('a', { run: ['true'], verbs: { create: '' } });
  |      ^
`,
  },
  {
    name: 'a tree that holds the state folder, which would never settle, is refused with the field',
    body: `  ng.task('b', { inputs: { all: ng.tree('.') }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task b: field inputs.all: the tree . holds nodegraph's state folder ${rig.path('.nodegraph')}, which every run changes: read a folder beside it
 --> ${f}:3:6
  |
3 |   ng.task('b', { inputs: { all: ng.tree('.') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'an input inside the state folder, which would never settle, is refused with the field: a file, a tree, a glob',
    body: `  ng.task('f', { inputs: { s: ng.file('.nodegraph/state.jsonl') }, run: ['true'] });
  ng.task('t', { inputs: { s: ng.tree('.nodegraph/generations') }, run: ['true'] });
  ng.task('g', { inputs: { s: ng.glob('./.nodegraph/**/*.json') }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task f: field inputs.s: the file .nodegraph/state.jsonl is inside nodegraph's state folder ${rig.path('.nodegraph')}, which every run changes: read a file beside it
 --> ${f}:3:6
  |
3 |   ng.task('f', { inputs: { s: ng.file('.nodegraph/state.jsonl') }, run: ['true'] });
  |      ^
error[invalid-field]: task t: field inputs.s: the tree .nodegraph/generations is inside nodegraph's state folder ${rig.path('.nodegraph')}, which every run changes: read a folder beside it
 --> ${f}:4:6
  |
4 |   ng.task('t', { inputs: { s: ng.tree('.nodegraph/generations') }, run: ['true'] });
  |      ^
error[invalid-field]: task g: field inputs.s: the glob ./.nodegraph/**/*.json is inside nodegraph's state folder ${rig.path('.nodegraph')}, which every run changes: match files beside it
 --> ${f}:5:6
  |
5 |   ng.task('g', { inputs: { s: ng.glob('./.nodegraph/**/*.json') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'a file input that is a folder says to read it as a tree',
    body: `  ng.task('a', { inputs: { d: ng.file('out') }, run: ['true'] });
`,
    expected: (f) => `error[invalid-field]: task a: field inputs.d: out is a folder: ng.file reads one file, ng.tree('out') a folder's files
 --> ${f}:3:6
  |
3 |   ng.task('a', { inputs: { d: ng.file('out') }, run: ['true'] });
  |      ^
`,
  },
  {
    name: 'an unknown field from a spread object points at the call, not at a key of that name further down',
    body: `  const common = { run: ['true'], priority: 5 };
  ng.task('a', { ...common } as never);
  const other = { priority: 10 };
  void other;
`,
    expected: (f) => `error[invalid-field]: task a: field priority: not a field of a task
 --> ${f}:4:6
  |
4 |   ng.task('a', { ...common } as never);
  |      ^
`,
  },
  {
    name: 'an unknown field is pointed at where it is written, with the field it may mean',
    body: `  ng.task('a', {
    run: ['true'],
    ouputs: ['out/a'],
  } as never);
  ng.task('b', { run: ['true'], verbs: { create: 'make', 'up date': 'x' } } as never);
`,
    expected: (f) => `error[invalid-field]: task a: field ouputs: not a field of a task; did you mean outputs?
 --> ${f}:5:5
  |
5 |     ouputs: ['out/a'],
  |     ^
error[invalid-field]: task b: field verbs.up date: not a field of verbs
 --> ${f}:7:58
  |
7 |   ng.task('b', { run: ['true'], verbs: { create: 'make', 'up date': 'x' } } as never);
  |                                                          ^
`,
  },
];

describe('bad input', () => {
  for (const c of cases) {
    test(c.name, async () => {
      // A node that was applied before the Nodefile went bad.
      rig.write('Nodefile.ts', `${header}  ng.task('keep', { outputs: ['out/keep'], run: ['sh', '-c', 'date +%N > out/keep'] });\n};\n`);
      expect((await rig.run(['apply'])).code).toBe(0);
      const before = snapshot();

      rig.write('Nodefile.ts', `${header}${c.body}};\n`);
      for (const command of [['plan'], ['apply'], ['apply', '--json'], ['status', '--json']]) {
        const result = await rig.run(command);
        expect(result.code).toBe(1);
        expect(result.stderr).toBe(c.expected('Nodefile.ts'));
        // With --json, stdout has the same errors as JSON lines, and nothing else.
        if (command.includes('--json')) {
          const reasons = result.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { type: string; failure: { reason: string } }));
          expect(reasons.map((r) => `error[${r.failure.reason}]`)).toEqual(c.expected('Nodefile.ts').match(/^error\[[a-z-]+\]/gm));
          expect(reasons.every((r) => r.type === 'error')).toBe(true);
        } else expect(result.stdout).toBe('');
      }
      expect(snapshot()).toEqual(before);
    });
  }

  test('an unknown command or option names the nearest one', async () => {
    const command = await rig.run(['aply']);
    expect(command.code).toBe(1);
    expect(command.stderr).toBe(
      `error[unknown-command]: unknown command aply; did you mean apply? (commands: ${COMMANDS.join(', ')}; see nodegraph --help)\n`,
    );
    // Help on a command that is not one is the same error, not the general help and success.
    const help = await rig.run(['help', 'aply']);
    expect(help.code).toBe(1);
    expect(help.stdout).toBe('');
    expect(help.stderr).toBe(command.stderr);
    expect((await rig.run(['--help', 'aply'])).stderr).toBe(command.stderr);
    const far = await rig.run(['frobnicate']);
    expect(far.stderr).toBe(`error[unknown-command]: unknown command frobnicate (commands: ${COMMANDS.join(', ')}; see nodegraph --help)\n`);
    const flag = await rig.run(['apply', '--jobz', '3']);
    expect(flag.code).toBe(1);
    expect(flag.stderr).toBe('error[unknown-option]: unknown option --jobz for apply; did you mean --jobs? (see nodegraph apply --help)\n');
    const short = await rig.run(['plan', '-x']);
    expect(short.stderr).toBe('error[unknown-option]: unknown option -x for plan (see nodegraph plan --help)\n');
  });

  test('--atomic with targets is refused before anything runs: a targeted apply has no generation to fall back to', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] }); ng.task('b', { run: ['true'] });`);
    for (const command of ['plan', 'apply']) {
      const refused = await rig.run([command, '--atomic', 'a']);
      expect(refused.code, command).toBe(1);
      expect(refused.stderr, command).toBe(`error[usage]: --atomic applies the whole graph as one generation, so it takes no targets (a): give them without it, or the whole graph with it (see nodegraph ${command} --help)\n`);
    }
    expect(rig.exists('out/a')).toBe(false);
    expect((await rig.run(['apply', 'a'])).code).toBe(0);
  });

  test('watch --debounce takes whole milliseconds a timer holds: an empty value or one past 2^31-1 ms is refused, not run as 0 or 1 ms', async () => {
    for (const value of ['', ' ', '1e3', '-5', '2147483648']) {
      const refused = await rig.run(['watch', `--debounce=${value}`]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(`error[usage]: --debounce takes a whole number of milliseconds up to 2147483647, not ${JSON.stringify(value)} (see nodegraph watch --help)\n`);
    }
  }, 30_000);

  test('--jobs, --keep and a generation number are decimal digits: an empty, spaced, hex or exponent value is refused, not read as a number', async () => {
    rig.nodefile(`ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] });`);
    for (const value of ['', ' 2', '0x2', '1e1', '2.0', '0']) {
      const jobs = await rig.run(['plan', `--jobs=${value}`]);
      expect(jobs.stderr, value).toBe(`error[usage]: --jobs takes a whole number of at least 1, not ${JSON.stringify(value)} (see nodegraph plan --help)\n`);
      const keep = await rig.run(['apply', `--keep=${value}`]);
      expect(keep.stderr, value).toBe(`error[usage]: --keep takes a whole number of at least 1, not ${JSON.stringify(value)} (see nodegraph apply --help)\n`);
      const back = await rig.run(['rollback', value]);
      expect(back.stderr, value).toBe(`error[usage]: a generation is a whole number, as nodegraph generations lists them, not ${JSON.stringify(value)} (see nodegraph rollback --help)\n`);
      expect([jobs.code, keep.code, back.code], value).toEqual([1, 1, 1]);
    }
    expect(rig.exists('out/a')).toBe(false);
    expect(rig.exists('.nodegraph/state.jsonl')).toBe(false);
  }, 60_000);

  test('an empty --state-dir or --file is refused: it would have meant the working folder, the state written among the project\'s files', async () => {
    rig.nodefile(`ng.task('a', { run: ['true'] });`);
    for (const [option, value] of [['--state-dir', ''], ['--state-dir', ' '], ['--file', ''], ['-f', '']] as const) {
      for (const command of ['plan', 'apply', 'destroy', 'status']) {
        const refused = await rig.run([command, option, value, '--yes'].filter((a) => command === 'destroy' || a !== '--yes'));
        expect(refused.code, `${command} ${option}`).toBe(1);
        const name = option === '-f' ? '--file' : option;
        expect(refused.stderr).toBe(`error[usage]: ${name} takes ${name === '--file' ? 'the Nodefile' : 'a folder'}, not ${JSON.stringify(value)} (see nodegraph ${command} --help)\n`);
      }
    }
    expect(readdirSync(rig.dir)).toEqual(['Nodefile.ts']);
  }, 60_000);

  test("a parse error is in nodegraph's words, and JSON under --json", async () => {
    const missing = await rig.run(['apply', '-j']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('error[usage]: --jobs needs a value (see nodegraph apply --help)\n');
    // A short option is named as the help names it, and a value that begins with a dash is said how to give.
    const dashed = await rig.run(['plan', '-j', '-1']);
    expect(dashed.stderr).toBe('error[usage]: --jobs needs a value (one that begins with a dash is written --jobs=VALUE) (see nodegraph plan --help)\n');
    const extra = await rig.run(['plan', '--json=yes']);
    expect(extra.stderr).toBe('error[usage]: --json takes no value (see nodegraph plan --help)\n');
    // A short flag with a value is said so, not read as the flags -= and -1.
    const shortExtra = await rig.run(['plan', '-v=1']);
    expect(shortExtra.stderr).toBe('error[usage]: --verbose (-v) takes no value (see nodegraph plan --help)\n');
    const json = await rig.run(['aply', '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      v: 1,
      type: 'error',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      failure: { reason: 'unknown-command', command: 'aply', commands: [...COMMANDS], suggestion: 'apply' },
    });
    const value = await rig.run(['status', '--json', '--jobs']);
    expect(JSON.parse(value.stdout)).toEqual({ v: 1, type: 'error', time: expect.any(String), failure: { reason: 'usage', command: 'status', message: '--jobs needs a value' } });
  });

  test('a module the Nodefile imports that is not there: the error names it, and points at no line of Node\'s own', async () => {
    rig.write('Nodefile.ts', `import './missing.ts';\n${header}  ng.task('a', { run: ['true'] });\n};\n`);
    const plan = await rig.run(['plan']);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toBe(`error[nodefile-threw]: the Nodefile threw while declaring the graph: Error: Cannot find module '${rig.path('missing.ts')}' imported from ${rig.path('Nodefile.ts')}\n`);
  });

  test('explain takes one task: a pattern is a usage error, not a crash', async () => {
    rig.write('Nodefile.ts', `${header}  ng.task('a/x', { run: ['true'] });\n  ng.task('a/y', { run: ['true'] });\n};\n`);
    const explained = await rig.run(['explain', 'a/*']);
    expect(explained.code).toBe(1);
    expect(explained.stderr).toBe('error[usage]: explain takes one task id, not a pattern such as a/* (see nodegraph explain --help)\n');
  });

  test('unlock takes no task', async () => {
    const result = await rig.run(['unlock', 'foo']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('error[usage]: unlock takes no arguments (it removes the state lock), not foo (see nodegraph unlock --help)\n');
  });

  test('a Nodefile outside the working folder is pointed at by its whole path, not by a climb of ../', async () => {
    const other = new Rig();
    try {
      const file = other.nodefile(`ng.task('a', { run: [] });`);
      const result = await rig.run(['plan', '-f', file]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`\n --> ${file}:3:4\n`);
    } finally {
      other.cleanup();
    }
  });

  test('generations takes no argument: a number given to it is refused, not ignored', async () => {
    const result = await rig.run(['generations', '3']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('error[usage]: generations takes no arguments (it lists them all; rollback N goes back to one), not 3 (see nodegraph generations --help)\n');
  });

  test('an unknown target', async () => {
    rig.nodefile(`ng.task('a', { run: ['true'] });`);
    const result = await rig.run(['apply', 'b']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('error[unknown-target]: no task matches b\n');
    rig.nodefile(`ng.task('kube1/kubelet', { run: ['true'] });`);
    expect((await rig.run(['plan', 'kube1/kubelett'])).stderr).toBe('error[unknown-target]: no task matches kube1/kubelett; did you mean kube1/kubelet?\n');
    // A word no id can be (an empty argument, a blank) is quoted, so that the line shows it.
    expect((await rig.run(['plan', ''])).stderr).toBe('error[unknown-target]: no task matches ""\n');
    expect((await rig.run(['apply', '--replace', 'kube1/kubelet '])).stderr).toBe('error[unknown-target]: no task matches "kube1/kubelet "; did you mean kube1/kubelet?\n');
    // A lone target that names a file, or plainly a path, is also said to be no plan.
    const noPlan = (file: string, what: string, also = ''): string => `error[unknown-target]: no task matches ${file}, and ${what} to apply (\`plan --out FILE\` saves one)${also}\n`;
    expect((await rig.run(['apply', 'plan.json'])).stderr).toBe(noPlan('plan.json', 'no file by that name is there'));
    expect((await rig.run(['apply', './kube1/kubelet'])).stderr).toBe(noPlan('./kube1/kubelet', 'no file by that name is there', '; did you mean kube1/kubelet?'));
    rig.write('kube1/kubelet.conf', 'not a plan\n');
    expect((await rig.run(['apply', 'kube1/kubelet.conf'])).stderr).toBe(noPlan('kube1/kubelet.conf', 'that file is not a plan'));
    expect((await rig.run(['apply', 'kube1'])).stderr).toBe('error[unknown-target]: no task matches kube1\n');
  });

  test('a Nodefile without a function as its default export says what it exports instead', async () => {
    const hint = ': export a function that receives the Nodefile API, e.g. `export default (ng: NodefileApi) => { ... }`\n';
    for (const [source, what] of [
      ['export const tasks = 1;\n', 'has no default export'],
      ['export default 42;\n', 'exports a number as its default, not a function'],
      ['export default { task: 1 };\n', 'exports an object as its default, not a function'],
      ['export default [];\n', 'exports an array as its default, not a function'],
    ] as const) {
      rig.write('Nodefile.ts', source);
      const result = await rig.run(['plan']);
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`error[nodefile-no-default]: ${rig.path('Nodefile.ts')} ${what}${hint}`);
    }
  });

  test('-f naming a folder says to name the Nodefile in it', async () => {
    rig.write('sub/keep.txt', 'x\n');
    const result = await rig.run(['plan', '-f', 'sub']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`error[nodefile-not-found]: ${rig.path('sub')} is a folder: name the Nodefile in it (-f ${rig.path('sub/Nodefile.ts')})\n`);
  });

  test('-f naming a file without a module\'s extension reads it as TypeScript, as make reads a Makefile', async () => {
    rig.write('Nodefile', `export default (ng: { task: (id: string, spec: object) => void }) => { ng.task('a', { outputs: ['out/a'], run: ['touch', 'out/a'] }); };\n`);
    const applied = await rig.run(['apply', '-f', 'Nodefile']);
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(rig.exists('out/a')).toBe(true);
    expect((await rig.run(['plan', '-f', 'Nodefile'])).stdout).toBe('No changes: 1 task up to date.\n');
  });

  test('a state folder that cannot be looked at (a symlink loop) is one error from plan and apply, not a crash', async () => {
    rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
    symlinkSync('loop', rig.path('loop'));
    const plan = await rig.run(['plan', '--state-dir', 'loop']);
    expect(plan.code).toBe(1);
    expect(plan.stderr).toMatch(/^error\[state-unreadable\]: the state in \S+\/loop\/state\.jsonl cannot be read: .*ELOOP[^\n]*\n$/);
    const apply = await rig.run(['apply', '--state-dir', 'loop']);
    expect(apply.code).toBe(1);
    expect(apply.stderr).toMatch(/^error\[state-dir-unwritable\]: cannot write to the state folder \S+\/loop: too many symbolic links encountered \(ELOOP\)\n$/);
    expect(rig.exists('out/t')).toBe(false);
  });

  test('no Nodefile', async () => {
    const result = await rig.run(['plan']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('error[nodefile-not-found]: no Nodefile.ts here (use -f to name one)\n');
  });

  test('an option that asks for a dry run says what the dry run is', async () => {
    const apply = await rig.run(['apply', '--dry-rnu']);
    expect(apply.code).toBe(1);
    expect(apply.stderr).toBe(
      'error[unknown-option]: unknown option --dry-rnu for apply; did you mean --dry-run? nodegraph has none: `nodegraph plan` shows what apply would do (see nodegraph apply --help)\n',
    );
    expect((await rig.run(['plan', '--dry-run'])).stderr).toBe(
      'error[unknown-option]: unknown option --dry-run for plan; plan is the dry run: it changes nothing (see nodegraph plan --help)\n',
    );
  });

  test('a missing Nodefile suggests the one that is there', async () => {
    rig.write('Nodefile.example.ts', `${header}};\n`);
    const none = await rig.run(['plan']);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe('error[nodefile-not-found]: no Nodefile.ts here; did you mean ./Nodefile.example.ts? (use -f to name it)\n');
    rig.write('deploy/Nodefile.ts', `${header}};\n`);
    const typo = await rig.run(['plan', '-f', 'deploy/Nodefil.ts']);
    expect(typo.stderr).toBe(`error[nodefile-not-found]: no Nodefile at ${rig.path('deploy/Nodefil.ts')}; did you mean ./deploy/Nodefile.ts? (use -f to name it)\n`);
    // A symlink to nothing is not suggested as itself.
    symlinkSync('nowhere.ts', rig.path('deploy/broken.ts'));
    const dangling = await rig.run(['plan', '-f', 'deploy/broken.ts']);
    expect(dangling.stderr).toBe(`error[nodefile-not-found]: no Nodefile at ${rig.path('deploy/broken.ts')}; did you mean ./deploy/Nodefile.ts? (use -f to name it)\n`);
  });

  test('a state folder that cannot be written is one sentence that names the folder', async () => {
    rig.nodefile(`ng.task('t', { outputs: ['out/t'], run: ['touch', 'out/t'] });`);
    rig.write('blocker', 'a file where a folder should be\n');
    const under = await rig.run(['apply', '--state-dir', 'blocker/state']);
    expect(under.code).toBe(1);
    expect(under.stderr).toBe(`error[state-dir-unwritable]: cannot write to the state folder ${rig.path('blocker/state')}: not a directory (ENOTDIR)\n`);
    // The lock file cannot be made (a folder is in its place): the folder, once, and the file in it.
    rig.write('st/lock/x', '');
    const lock = await rig.run(['apply', '--state-dir', 'st']);
    expect(lock.stderr).toBe(`error[state-dir-unwritable]: cannot write to the state folder ${rig.path('st')}: lock: illegal operation on a directory (EISDIR)\n`);
    // So is a folder where the journal should be.
    rmSync(rig.path('st/lock'), { recursive: true });
    rig.write('st/state.jsonl/x', '');
    const journal = await rig.run(['apply', '--state-dir', 'st']);
    expect(journal.stderr).toBe(`error[state-dir-unwritable]: cannot write to the state folder ${rig.path('st')}: state.jsonl: illegal operation on a directory (EISDIR)\n`);
    expect(rig.exists('out/t')).toBe(false);
  });

  test('a file named in bytes that are not UTF-8 is one error that names it, in a tree, a glob or an output', async () => {
    rig.write('in/a.txt', 'a\n');
    rig.nodefile(`ng.task('tree', { inputs: { src: ng.tree('in') }, outputs: ['out/tree'], run: ['sh', '-c', 'ls in > out/tree'] });
  ng.task('glob', { inputs: { src: ng.glob('in/*') }, outputs: ['out/glob'], run: ['sh', '-c', 'ls in > out/glob'] });
  ng.task('made', { outputs: ['made'], run: ['sh', '-c', 'mkdir -p made && touch made/ok "made/$(printf "$NAME")"'] });`);
    expect((await rig.run(['apply'], { NAME: 'plain' })).code).toBe(0);
    const before = snapshot();
    // `caf` and Latin-1's é: Node lists it as caf\uFFFD, a name that opens nothing.
    const latin1 = (dir: string): Buffer => Buffer.concat([Buffer.from(rig.path(dir, 'caf')), Buffer.from([0xe9])]);
    writeFileSync(latin1('in'), 'changed\n');
    const error = (task: string, line: number, field: string, file: string, fix: string): string =>
      `error[invalid-field]: task ${task}: field ${field}: ${file} is named in bytes that are not UTF-8: nodegraph reads names as text, so it cannot read the file; ${fix}\n --> Nodefile.ts:${line}:`;
    for (const command of [['plan'], ['apply']]) {
      const refused = await rig.run(command);
      expect(refused.code).toBe(1);
      const fix = 'rename it (convmv) or leave it out of the input';
      expect(refused.stderr.match(/^error\[/gm)).toHaveLength(2);
      expect(refused.stderr).toContain(error('tree', 3, 'inputs.src', 'in/caf\\xe9', fix));
      expect(refused.stderr).toContain(error('glob', 4, 'inputs.src', 'in/caf\\xe9', fix));
    }
    rmSync(latin1('in'));
    expect(snapshot()).toEqual(before);
    // An output that gains such a name: what the task made can no longer be read.
    writeFileSync(latin1('made'), '');
    const drifted = await rig.run(['plan']);
    expect(drifted.code).toBe(1);
    expect(drifted.stderr).toContain(error('made', 5, 'outputs', 'made/caf\\xe9', 'make it under a UTF-8 name, or remove it'));
    rmSync(latin1('made'));
    // A task that makes one fails, saying so, and runs again next time.
    const made = await rig.run(['apply', '--replace', 'made'], { NAME: '\\351' });
    expect(made.code).toBe(1);
    expect(made.stdout).toContain('its output made/\\xe9 is named in bytes that are not UTF-8');
    expect((await rig.run(['plan', '--detailed-exitcode'])).code).toBe(2);
  });

  test('a stale saved plan names the input, file and output that changed', async () => {
    rig.write('in.txt', 'one\n');
    rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt'), level: ng.value(process.env.LEVEL ?? 'info'), token: ng.env('TOKEN') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    expect((await rig.run(['plan', '--out', 'plan.json'])).code).toBe(0);
    rig.write('in.txt', 'two\n');
    rig.write('out/copy', 'edited\n');
    const stale = await rig.run(['apply', 'plan.json'], { LEVEL: 'debug', TOKEN: 'x' });
    expect(stale.code).toBe(1);
    expect(stale.stderr).toBe(
      `error[plan-stale]: the saved plan ${rig.path('plan.json')} no longer matches; make a new one with \`nodegraph plan --out\`:
  - task copy: input src (in.txt) changed
  - task copy: input level changed
  - task copy: input token changed
  - task copy: output out/copy changed
`,
    );
  });

  test('a generation written by a newer nodegraph is refused with the words of a newer journal, and left as it is', async () => {
    rig.write('in.txt', 'one\n');
    rig.nodefile(`ng.task('copy', { inputs: { src: ng.file('in.txt') }, outputs: ['out/copy'], run: ['cp', 'in.txt', 'out/copy'] });`);
    expect((await rig.run(['apply'])).code).toBe(0);
    rig.write('in.txt', 'two\n');
    expect((await rig.run(['apply'])).code).toBe(0);
    const manifest = rig.path('.nodegraph/generations/1.json');
    const { GENERATION_VERSION } = await import('../../src/transaction/manifest.ts');
    const newer = { ...(JSON.parse(rig.read('.nodegraph/generations/1.json')) as object), version: GENERATION_VERSION + 1 };
    rig.write('.nodegraph/generations/1.json', JSON.stringify(newer));
    const before = snapshot();
    const words = (file: string, what: string, found: number, supported: number): string =>
      `error[state-unreadable]: the state in ${file} cannot be read: ${file} was written by a newer nodegraph (${what} format ${found}; this version reads up to ${supported}); upgrade nodegraph — the file was left untouched\n`;
    for (const command of [['generations'], ['generations', '--json'], ['rollback'], ['rollback', '1']]) {
      const result = await rig.run(command);
      expect(result.code).toBe(1);
      if (command.includes('--json')) expect(JSON.parse(result.stdout)).toMatchObject({ type: 'error', failure: { reason: 'state-unreadable', path: manifest } });
      else expect(result.stderr).toBe(words(manifest, 'generation', GENERATION_VERSION + 1, GENERATION_VERSION));
    }
    expect(snapshot()).toEqual(before);
    expect(rig.read('out/copy')).toBe('two\n');

    // The journal's own refusal, for the same words.
    const journal = rig.path('.nodegraph/state.jsonl');
    const [, ...rest] = rig.read('.nodegraph/state.jsonl').split('\n');
    const header = JSON.stringify({ format: 'nodegraph-state', version: 99 });
    const { crc32 } = await import('node:zlib');
    rig.write('.nodegraph/state.jsonl', [`${crc32(header).toString(16).padStart(8, '0')} ${header}`, ...rest].join('\n'));
    const { JOURNAL_VERSION } = await import('../../src/state/journal.ts');
    expect((await rig.run(['plan'])).stderr).toBe(words(journal, 'state', 99, JOURNAL_VERSION));
  });
});
