// status, graph and completion: what they say of a graph and its state.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { cli, Rig, until } from '../support/rig.ts';

let rig: Rig;
beforeEach(() => {
  rig = new Rig();
});
afterEach(() => rig.cleanup());

describe('status', () => {
  test('a summary line, and --detailed-exitcode: 0 when all is applied, 2 when anything is not', async () => {
    rig.nodefile(`
      ng.task('ok', { run: ['true'] });
      ng.task('bad', { run: ['false'] });
    `);
    await rig.run(['apply']);
    const status = await rig.run(['status', '--detailed-exitcode']);
    expect(status.code).toBe(2);
    expect(status.stdout).toMatch(/^ok {3}applied\nbad {2}failed {3}last run failed: exited with code 1\nStatus: 2 tasks: 1 applied, 1 failed\.\n(No generation recorded yet|Generation \d+ is current)\.\n$/);
    expect((await rig.run(['status'])).code).toBe(0);
    expect((await rig.run(['status', 'ok', '--detailed-exitcode'])).code).toBe(0);
    rig.nodefile(`ng.task('ok', { run: ['true'] });`);
    // The orphan is not applied either.
    expect((await rig.run(['status', '--detailed-exitcode'])).code).toBe(2);
    await rig.run(['apply']);
    const settled = await rig.run(['status', '--detailed-exitcode', '--json']);
    expect(settled.code).toBe(0);
    expect(JSON.parse(settled.stdout)).toEqual({
      format: 'nodegraph-status',
      version: 1,
      generation: { current: expect.any(Number), interrupted: null, underWay: null, orphanedTransaction: null },
      tasks: [{ id: 'ok', status: 'applied', reasons: [], reasonDetails: [] }],
      counts: { applied: 1, running: 0, stale: 0, drifted: 0, failed: 0, stopped: 0, absent: 0, trace: 0, orphan: 0 },
      lock: null,
    });
  });

  test("the lock's holder while it runs, and the lock it left when killed", async () => {
    rig.nodefile(`ng.task('wait', { run: { shell: 'while [ ! -e go ]; do sleep 0.02; done' } });`);
    const child = rig.spawn(['apply']);
    await until(() => existsSync(rig.path('.nodegraph/lock')));
    const held = await rig.run(['status', '--json']);
    const lock = JSON.parse(held.stdout).lock;
    expect(lock).toEqual({ state: 'held', holder: { pid: child.pid, host: expect.any(String), command: 'nodegraph apply', startedAt: expect.any(String) } });
    expect((await rig.run(['status'])).stdout).toContain(`\nLock: held by pid ${child.pid} on ${lock.holder.host} (nodegraph apply), since ${lock.holder.startedAt}.\n`);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('exit', resolve));
    rig.write('go', '');
    expect((await rig.run(['status'])).stdout).toContain(
      `\nLock: left by pid ${child.pid} on ${lock.holder.host} (nodegraph apply), since ${lock.holder.startedAt}, which is no longer running; the next apply takes it over.\n`,
    );
  });
});

describe('graph', () => {
  const body = `
    const image = ng.task('host/image', { run: ['true'] });
    const config = ng.task('kube1/config', { run: ['true'] });
    ng.task('kube1/containerd', { inputs: { config, rootfs: image }, after: ['host/network'], run: ['true'] });
    ng.task('host/network', { run: ['true'] });
    ng.task('lonely', { run: ['true'] });
  `;

  test('clusters by namespace, trigger edges named after the input, order edges dashed, a legend', async () => {
    rig.nodefile(body);
    const dot = (await rig.run(['graph'])).stdout;
    expect(dot).toContain(
      [
        '  subgraph cluster_0 {',
        '    label="host/";',
        '    "host/image";',
        '    "host/network";',
        '  }',
        '  subgraph cluster_1 {',
        '    label="kube1/";',
        '    "kube1/config";',
        '    "kube1/containerd";',
        '  }',
        '  "lonely";',
        '  "kube1/config" -> "kube1/containerd" [label="config"];',
        '  "host/image" -> "kube1/containerd" [label="rootfs"];',
        '  "host/network" -> "kube1/containerd" [style=dashed];',
        '  subgraph cluster_legend {',
      ].join('\n'),
    );
  });

  test('TARGET exports that part of the graph; an unknown target is an error', async () => {
    rig.nodefile(body);
    const part = JSON.parse((await rig.run(['graph', 'kube1/config', 'host/network', '--format', 'json'])).stdout);
    expect(part.tasks.map((t: { id: string }) => t.id)).toEqual(['kube1/config', 'host/network']);
    const closure = JSON.parse((await rig.run(['graph', 'kube1/*', '--format', 'json'])).stdout);
    expect(closure.tasks.map((t: { id: string }) => t.id).sort()).toEqual(['host/image', 'host/network', 'kube1/config', 'kube1/containerd']);
    expect(closure.edges).toContainEqual({ from: 'host/image', to: 'kube1/containerd', kind: 'input', inputs: ['rootfs'] });
    const unknown = await rig.run(['graph', 'no/such']);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toBe('error[unknown-target]: no task matches no/such\n');
  });

  test('--status colours each task by its status', async () => {
    rig.nodefile(`
      ng.task('ok', { run: ['true'] });
      ng.task('bad', { run: ['false'] });
      ng.task('new', { after: ['bad'], run: ['true'] });
    `);
    await rig.run(['apply', '-k']);
    const dot = (await rig.run(['graph', '--status'])).stdout;
    expect(dot).toContain('  "ok" [style=filled, fillcolor="#b7e1a1", tooltip="applied"];\n');
    expect(dot).toContain('  "bad" [style=filled, fillcolor="#e06666", tooltip="failed"];\n');
    expect(dot).toContain('  "new" [style=filled, fillcolor="#ffffff", tooltip="absent"];\n');
    expect(dot).toContain('    "legend:failed" [label="failed", shape=box, style=filled, fillcolor="#e06666"];\n');
    const json = JSON.parse((await rig.run(['graph', '--status', '--format', 'json'])).stdout);
    expect(json.tasks.map((t: { id: string; status: string }) => `${t.id} ${t.status}`)).toEqual(['ok applied', 'bad failed', 'new absent']);
    expect((await rig.run(['graph'])).stdout).not.toContain('fillcolor');
  });
});

describe('completion', () => {
  /** What bash completes for `words` (the last one being completed), with the script nodegraph prints. */
  function complete(words: string[]): string[] {
    const script = execFileSync(process.execPath, [cli, 'completion', 'bash'], { encoding: 'utf8' });
    const shell = `nodegraph() { ${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} "$@"; }
${script}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}
_nodegraph; printf '%s\\n' "\${COMPREPLY[@]}"`;
    return execFileSync('bash', ['-c', shell], { cwd: rig.dir, encoding: 'utf8' }).split('\n').filter((l) => l !== '');
  }

  test('bash completes commands, options and task ids', () => {
    rig.nodefile(`ng.task('kube1/kubelet', { run: ['true'] }); ng.task('kube1/containerd', { run: ['true'] }); ng.task('host/x', { run: ['true'] });`);
    expect(complete(['nodegraph', 'ap'])).toEqual(['apply']);
    expect(complete(['nodegraph', 'plan', '--det'])).toEqual(['--detailed-exitcode']);
    expect(complete(['nodegraph', 'apply', 'kube1/'])).toEqual(['kube1/kubelet', 'kube1/containerd']);
    expect(complete(['nodegraph', 'completion', ''])).toEqual(['bash', 'zsh', 'fish']);
  });

  test('zsh and fish scripts; another shell is a usage error', async () => {
    expect((await rig.run(['completion', 'zsh'])).stdout).toMatch(/^# nodegraph completion for zsh\nautoload -U \+X bashcompinit && bashcompinit\n/);
    const fish = (await rig.run(['completion', 'fish'])).stdout;
    expect(fish).toContain("complete -c nodegraph -n '__fish_seen_subcommand_from plan' -l detailed-exitcode\n");
    // A short form completes too, and an option that takes a value says so.
    expect(fish).toContain("complete -c nodegraph -n '__fish_seen_subcommand_from apply' -l jobs -s j -r\n");
    const other = await rig.run(['completion', 'tcsh']);
    expect(other.code).toBe(1);
    expect(other.stderr).toBe('error[usage]: completion takes one shell: bash, zsh, fish (see nodegraph completion --help)\n');
  });
});
