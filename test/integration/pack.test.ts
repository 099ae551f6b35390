// `npm pack` makes a package that installs into an empty folder and runs:
// there, below node_modules, Node will not strip types, so it must be JS.

import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test } from 'vitest';
import { oldNode } from '../support/old-node.ts';
import { repo } from '../support/rig.ts';

test('the packed package installs into an empty folder, builds spawnd, runs nodegraph --version, and applies a graph through spawnd', () => {
  const out = mkdtempSync(path.join(tmpdir(), 'nodegraph-pack-'));
  // Pack a copy: packing builds and removes dist/ in the folder it runs in, and
  // the other tests run the checkout's CLI meanwhile.
  const copy = mkdtempSync(path.join(tmpdir(), 'nodegraph-src-'));
  for (const entry of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.types.json', 'bin', 'src', 'scripts', 'native', 'schemas', 'README.md']) {
    cpSync(path.join(repo, entry), path.join(copy, entry), { recursive: true });
  }
  symlinkSync(path.join(repo, 'node_modules'), path.join(copy, 'node_modules'));
  const home = mkdtempSync(path.join(tmpdir(), 'nodegraph-install-'));
  try {
    const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env['PATH']}` };
    const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: copy, env, encoding: 'utf8' }).trim().split('\n').at(-1)!;
    expect(existsSync(path.join(copy, 'dist'))).toBe(false); // postpack cleaned up after itself
    execFileSync('npm', ['init', '-y'], { cwd: home, env, stdio: 'ignore' });
    // Of the scripts npm runs for a project that installs the package (and lists in its warning), the
    // package names only `install`, and ships its file.
    const packed = JSON.parse(execFileSync('tar', ['xzOf', path.join(out, name), 'package/package.json'], { encoding: 'utf8' })) as { scripts: Record<string, string> };
    const shipped = execFileSync('tar', ['tzf', path.join(out, name)], { encoding: 'utf8' }).split('\n');
    const installing = Object.entries(packed.scripts).filter(([script]) => ['preinstall', 'install', 'postinstall', 'prepare'].includes(script));
    expect(installing.map(([script]) => script)).toEqual(['install']);
    for (const [script, command] of installing) {
      const files = command.match(/\bscripts\/\S+/g) ?? [];
      expect(files.length).toBeGreaterThan(0);
      for (const file of files) expect(shipped, `${script}: ${command}`).toContain(`package/${file}`);
    }
    // README's install steps, as written there (the package named by its tarball here), under npm's
    // strictest setting: an install script no allowScripts entry covers fails the install.
    const steps = /npm 11\n[\s\S]*?\n\n((?: {4}npm .*\n)+)/.exec(readFileSync(path.join(repo, 'README.md'), 'utf8'))?.[1]?.trim().split('\n').map((l) => l.trim());
    expect(steps).toEqual(['npm install --ignore-scripts nodegraph', 'npm install-scripts approve nodegraph', 'npm rebuild nodegraph']);
    const strict = { ...env, npm_config_strict_allow_scripts: 'true' };
    const unapproved = spawnSync('npm', ['install', '--no-audit', '--no-fund', path.join(out, name)], { cwd: home, env: strict, encoding: 'utf8' });
    expect(unapproved.status).not.toBe(0);
    expect(unapproved.stderr).toContain('ESTRICTALLOWSCRIPTS');
    const spawndPath = path.join(home, 'node_modules/nodegraph/node_modules/.nodegraph/spawnd');
    for (const step of steps!) {
      // `npm install` takes the tarball; approve and rebuild name the package as installed.
      const args = step.split(' ').slice(1).map((a, i, all) => (all[0] === 'install' && i === all.length - 1 ? path.join(out, name) : a));
      const ran = spawnSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel', 'warn'], { cwd: home, env: strict, encoding: 'utf8' });
      expect(ran.status, `${step}: ${ran.stderr}`).toBe(0);
      // Installed without its script, the package has no spawnd until the rebuild.
      if (step.includes('--ignore-scripts')) expect(existsSync(spawndPath)).toBe(false);
    }
    // Approved, a later install runs the script without a warning.
    const again = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel', 'warn'], { cwd: home, env: strict, encoding: 'utf8' });
    expect(again.status).toBe(0);
    expect(again.stderr).not.toContain('install-scripts');
    const version = execFileSync(process.execPath, [path.join(home, 'node_modules/.bin/nodegraph'), '--version'], { cwd: home, encoding: 'utf8' });
    expect(version).toMatch(/^nodegraph \d+\.\d+\.\d+\n$/);
    // And as a shell runs it, through the link npm made: its launcher line starts node from the real file.
    expect(execFileSync(path.join(home, 'node_modules/.bin/nodegraph'), ['--version'], { cwd: home, env, encoding: 'utf8' })).toBe(version);
    expect(existsSync(path.join(home, 'node_modules/nodegraph/dist/lib/main.js'))).toBe(true);

    // Its install script compiled spawnd (scripts/build-spawnd.mjs, from the package's native/), run by the rebuild.
    expect(existsSync(spawndPath)).toBe(true);

    // Each task records the pid of the process that started it: with spawnd, one process starts every command.
    const tasks = 200;
    const nodefile = `import type { NodefileApi } from 'nodegraph';
export default (ng: NodefileApi): void => {
  for (let i = 0; i < ${tasks}; i++) ng.task(\`t\${i}\`, { outputs: [\`out/\${i}\`], run: ['sh', '-c', \`echo $PPID > out/\${i}\`] });
};
`;
    const spawnd = path.join(home, 'spawnd');
    mkdirSync(spawnd);
    writeFileSync(path.join(spawnd, 'Nodefile.ts'), nodefile);
    const applied = execFileSync(process.execPath, [path.join(home, 'node_modules/.bin/nodegraph'), 'apply', '-j', '2'], { cwd: spawnd, encoding: 'utf8', env: { ...process.env, CI: '1' } });
    expect(applied).toMatch(new RegExp(`Apply: ${tasks} ran, 0 failed`));
    const spawners = new Set(Array.from({ length: tasks }, (_, i) => readFileSync(path.join(spawnd, `out/${i}`), 'utf8').trim()));
    expect(spawners.size).toBe(1);
    writeFileSync(path.join(home, 'Nodefile.ts'), nodefile);
    execFileSync(process.execPath, [path.join(home, 'node_modules/.bin/nodegraph'), 'apply', '-j', '2'], { cwd: home, encoding: 'utf8', env: { ...process.env, CI: '1' } });

    // The bundle takes node:fs by process.getBuiltinModule (scripts/build-dist.ts): a no-op
    // loads none of what an ES import's namespace of node:fs would (fs/promises, readline).
    const loaded = path.join(home, 'loaded.txt');
    writeFileSync(path.join(home, 'loaded.cjs'), `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, process.moduleLoadList.join('\\n')));\n`);
    const noop = execFileSync(process.execPath, ['--require', './loaded.cjs', path.join(home, 'node_modules/.bin/nodegraph'), 'apply'], { cwd: home, encoding: 'utf8', env: { ...process.env, CI: '1' } });
    expect(noop).toMatch(/Apply: 0 ran, 0 failed/);
    const builtins = readFileSync(loaded, 'utf8').split('\n');
    expect(builtins).toContain('NativeModule fs');
    expect(builtins.filter((m) => /internal\/fs\/promises|readline/.test(m))).toEqual([]);

    // Bundled, a declaration's site is still the Nodefile's line, not a frame inside nodegraph.
    writeFileSync(path.join(home, 'Nodefile.ts'), `export default (ng: any): void => {\n  ng.task('bad', { run: 'true' });\n};\n`);
    const bad = spawnSync(process.execPath, [path.join(home, 'node_modules/.bin/nodegraph'), 'plan'], { cwd: home, encoding: 'utf8', env: { ...process.env, CI: '1' } });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/^error\[invalid-field\]: task bad: field run: .*\n --> Nodefile\.ts:2:6\n/);
    // A fresh TypeScript project (the tsconfig.json `tsc --init` writes, nothing else installed, no
    // @types/node) checks a Nodefile against the package's declarations: the Nodefile API alone, which
    // needs nothing the project lacks; and a wrong field is an error.
    expect(existsSync(path.join(home, 'node_modules/nodegraph/dist/types/index.d.ts'))).toBe(true);
    const typedDir = path.join(home, 'typed');
    mkdirSync(typedDir);
    writeFileSync(path.join(typedDir, 'package.json'), '{"type":"module"}\n');
    const tsc = path.join(repo, 'node_modules/typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '--init'], { cwd: typedDir, stdio: 'ignore' });
    const typed = (body: string, ...flags: string[]): ReturnType<typeof spawnSync> => {
      writeFileSync(path.join(typedDir, 'Nodefile.ts'), `import type { NodefileApi } from 'nodegraph';\nexport default (ng: NodefileApi): void => {\n${body}\n};\n`);
      return spawnSync(process.execPath, [tsc, '-p', typedDir, '--noEmit', ...flags], { cwd: typedDir, encoding: 'utf8' });
    };
    const body = `  ng.task('t', { outputs: ['out/t'], run: async (ctx) => { ctx.signal.throwIfAborted(); await ctx.exec(['touch', 'out/t']); } });`;
    for (const flags of [[], ['--skipLibCheck', 'false'], ['--skipLibCheck', 'false', '--lib', 'esnext']]) {
      const good = typed(body, ...flags);
      expect(good.stdout, flags.join(' ')).toBe('');
      expect(good.status).toBe(0);
    }
    const wrong = typed(`  ng.task('t', { outputs: 3, run: ['true'] });`);
    expect(wrong.status).not.toBe(0);
    expect(String(wrong.stdout).trim().split('\n')).toEqual([expect.stringMatching(/^Nodefile\.ts\(3,18\): error TS2322: /)]);
    // The library entry loads, with the operations it exports.
    const lib = execFileSync(process.execPath, ['--input-type=module', '-e', "const m = await import('nodegraph/library'); console.log(typeof m.applyNodefile, typeof m.LocalRunner)"], { cwd: home, encoding: 'utf8' });
    expect(lib).toBe('function function\n');
    // An older Node is told to install a newer one (npx and a pinned Node are a checkout's).
    const old = oldNode();
    if (old !== undefined) {
      const refused = spawnSync(old.path, [path.join(home, 'node_modules/.bin/nodegraph'), '--version'], { cwd: home, encoding: 'utf8' });
      expect(refused.stderr).toBe(`nodegraph needs Node.js 22.18 or newer (this is ${old.version}): install a newer Node.js (https://nodejs.org).\n`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
    rmSync(copy, { recursive: true, force: true });
  }
}, 180_000);
