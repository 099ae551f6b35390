// The lifecycle helper is a real shell script: run it with sh against a fake
// runc (a script that keeps its state in a file) in a temporary folder.

import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HELPER_SCRIPT, helperAt } from '../../../src/node/helper.ts';
import { realExec } from '../../support/exec.ts';
import { tryExec } from '../../../src/node/exec.ts';

let dir: string;
let helper: ReturnType<typeof helperAt>;
let runc: string;

// A runc that knows one container; its status lives in $DIR/status, calls are logged to $DIR/log.
const FAKE_RUNC = `#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/log"
[ "$1" = --root ] && shift 2
cmd=$1; shift
status=$(cat "$dir/status" 2>/dev/null || true)
case "$cmd" in
  state)
    [ -n "$status" ] || { echo "container does not exist" >&2; exit 1; }
    bundle=$(cat "$dir/bundle" 2>/dev/null || echo "$dir/bundle.d")
    printf '{\\n  "ociVersion": "1.0.2",\\n  "id": "%s",\\n  "status": "%s",\\n  "bundle": "%s",\\n  "rootfs": "%s/rootfs"\\n}\\n' "$1" "$status" "$bundle" "$bundle" ;;
  kill) [ "$(cat "$dir/stubborn" 2>/dev/null)" = yes ] && [ "$2" = 37 ] || echo stopped > "$dir/status" ;;
  delete) [ -n "$status" ] || exit 1; rm -f "$dir/status" ;;
  exec) shift; echo "inside: $*" ;;
esac
`;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-helper-'));
  const script = path.join(dir, 'node-helper');
  writeFileSync(script, HELPER_SCRIPT, { mode: 0o755 });
  helper = helperAt(script);
  runc = path.join(dir, 'runc');
  mkdirSync(path.join(dir, 'bundle.d/rootfs'), { recursive: true });
  writeFileSync(runc, FAKE_RUNC);
  chmodSync(runc, 0o755);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const run = (argv: string[]) => tryExec(realExec(dir), argv);
const runcLog = (): string[] => (existsSync(path.join(dir, 'log')) ? readFileSync(path.join(dir, 'log'), 'utf8').trim().split('\n') : []);

describe('node helper', () => {
  it('is a valid POSIX shell script', () => {
    execFileSync('sh', ['-n', helper.path]);
  });

  it('stops a running container with SIGRTMIN+3 and deletes it', async () => {
    writeFileSync(path.join(dir, 'status'), 'running');
    const r = await run(helper.stopContainer({ binary: runc, stateRoot: '/run/x' }, 'kube1', 5));
    expect(r.exitCode).toBe(0);
    expect(runcLog()).toEqual(['--root /run/x state kube1', '--root /run/x state kube1', '--root /run/x kill kube1 37', '--root /run/x state kube1', '--root /run/x delete --force kube1']);
    expect(existsSync(path.join(dir, 'status'))).toBe(false);
  });

  it('waits a stop timeout given in fractions of a second, rounded up, rather than killing at once', async () => {
    writeFileSync(path.join(dir, 'status'), 'running');
    const r = await run(helper.stopContainer({ binary: runc }, 'kube1', 0.5));
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toBe('');
    expect(runcLog()).toEqual(['state kube1', 'state kube1', 'kill kube1 37', 'state kube1', 'delete --force kube1']);
  });

  it('kills a container whose rootfs is gone at once, by its id: nothing in it can halt', async () => {
    writeFileSync(path.join(dir, 'status'), 'running');
    writeFileSync(path.join(dir, 'stubborn'), 'yes');
    rmSync(path.join(dir, 'bundle.d'), { recursive: true });
    const r = await run(helper.stopContainer({ binary: runc }, 'kube1', 60, 'nodegraph-kube1.service'));
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(`container kube1: its rootfs is gone (${dir}/bundle.d); killing it`);
    expect(runcLog().filter((l) => !l.startsWith('state'))).toEqual(['kill --all kube1 KILL', 'delete --force kube1']);
    expect(existsSync(path.join(dir, 'status'))).toBe(false);
  });

  it('refuses a stop-container call with a wrong number of arguments', async () => {
    const r = await run([helper.path, 'stop-container', runc, '-', 'kube1']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toBe('node-helper: usage: stop-container RUNC STATE-ROOT|- ID TIMEOUT-SECONDS [UNIT]\n');
  });

  it('kills a container that does not stop in time', async () => {
    writeFileSync(path.join(dir, 'status'), 'running');
    writeFileSync(path.join(dir, 'stubborn'), 'yes');
    const r = await run(helper.stopContainer({ binary: runc }, 'kube1', 1));
    expect(r.exitCode).toBe(0);
    expect(runcLog()).toContain('kill --all kube1 KILL');
    expect(runcLog().at(-1)).toBe('delete --force kube1');
  }, 10_000);

  it('succeeds when the container is already stopped or gone', async () => {
    writeFileSync(path.join(dir, 'status'), 'stopped');
    expect((await run(helper.stopContainer({ binary: runc }, 'kube1', 5))).exitCode).toBe(0);
    expect(runcLog()).toEqual(['state kube1', 'delete --force kube1']);
    const again = await run(helper.stopContainer({ binary: runc }, 'kube1', 5));
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain('does not exist');
  });

  it('runs systemctl inside only when the container runs', async () => {
    const idle = await run(helper.service({ binary: runc }, 'kube1', 'stop', 'kubelet'));
    expect(idle).toMatchObject({ exitCode: 0 });
    expect(idle.stdout).toContain('not running; nothing to do');
    writeFileSync(path.join(dir, 'status'), 'running');
    const busy = await run(helper.service({ binary: runc }, 'kube1', 'stop', 'kubelet'));
    expect(busy.stdout).toBe('inside: systemctl stop kubelet\n');
  });

  it('removes a tree, and refuses / and relative paths', async () => {
    const target = path.join(dir, 'tree');
    mkdirSync(path.join(target, 'a/b'), { recursive: true });
    writeFileSync(path.join(target, 'a/b/f'), 'x');
    expect((await run(helper.remove(target))).exitCode).toBe(0);
    expect(existsSync(target)).toBe(false);
    expect((await run(helper.remove(target))).exitCode).toBe(0); // already gone
    expect((await run(helper.remove('/'))).exitCode).toBe(1);
    expect((await run(helper.remove('relative/path'))).exitCode).toBe(1);
    expect((await run(helper.unmountBelow(path.join(dir, 'nothing-mounted')))).exitCode).toBe(0);
  });

  it('prunes empty folders and keeps the others', async () => {
    mkdirSync(path.join(dir, 'empty'));
    mkdirSync(path.join(dir, 'full'));
    writeFileSync(path.join(dir, 'full/f'), 'x');
    expect((await run(helper.prune(path.join(dir, 'empty'), path.join(dir, 'full'), path.join(dir, 'absent')))).exitCode).toBe(0);
    expect(existsSync(path.join(dir, 'empty'))).toBe(false);
    expect(existsSync(path.join(dir, 'full/f'))).toBe(true);
  });

  it('with --made, removes or prunes only what the ledger lists as made by nodegraph', async () => {
    const ledger = path.join(dir, 'host-folders');
    for (const name of ['made', 'found', 'unlisted', 'made-empty', 'found-empty']) mkdirSync(path.join(dir, name, 'sub'), { recursive: true });
    for (const name of ['made-empty', 'found-empty']) rmSync(path.join(dir, name, 'sub'), { recursive: true });
    writeFileSync(ledger, ['# ledger', `made ${dir}/made`, `found ${dir}/found`, `made ${dir}/made-empty`, `found ${dir}/found-empty`, ''].join('\n'));
    for (const name of ['made', 'found', 'unlisted']) {
      const r = await run(helper.removeUnlessMounted(path.join(dir, name), ledger));
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toBe(name === 'made' ? '' : `keeping ${dir}/${name}: it was there before nodegraph\n`);
    }
    expect((await run(helper.remove(path.join(dir, 'found'), ledger))).stdout).toBe(`keeping ${dir}/found: it was there before nodegraph\n`);
    expect((await run(helper.pruneMade(ledger, path.join(dir, 'made-empty'), path.join(dir, 'found-empty'), path.join(dir, 'unlisted')))).exitCode).toBe(0);
    expect(['made', 'found', 'unlisted', 'made-empty', 'found-empty'].filter((name) => existsSync(path.join(dir, name)))).toEqual(['found', 'unlisted', 'found-empty']);
    expect(existsSync(path.join(dir, 'found/sub'))).toBe(true);
  });

  it('keeps a directory with a mount below it, or refuses to remove it', async () => {
    // /proc is mounted on any Linux machine: a harmless stand-in for a pod volume.
    const keep = await run(helper.removeUnlessMounted('/proc'));
    expect(keep.exitCode).toBe(0);
    expect(keep.stdout).toContain('keeping /proc: still mounted below it: /proc');
    const refuse = await run(helper.remove('/proc'));
    expect(refuse.exitCode).toBe(1);
    expect(refuse.stderr).toContain('not removing /proc: mounted below it');
  });

  it("reads the running kernel's modules: loaded from /proc/modules, built in from /sys/module, or missing", async () => {
    // /sys/module/kernel is on every Linux kernel and is never a loadable module.
    const wanted = ['kernel', 'nodegraph-no-such-module'];
    const procModules = existsSync('/proc/modules') ? readFileSync('/proc/modules', 'utf8') : '';
    const loaded = procModules.split('\n')[0]?.split(' ')[0];
    if (loaded) wanted.push(loaded.replaceAll('_', '-'));
    const r = await run(helper.kernelModules(...wanted));
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe(
      ['kernel built-in', 'nodegraph-no-such-module missing', ...(loaded ? [`${loaded.replaceAll('_', '-')} loaded`] : [])].map((l) => `${l}\n`).join(''),
    );
  });

  it('says what it can do when asked for something else', async () => {
    const r = await run([helper.path, 'frobnicate']);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('unknown command: frobnicate');
  });
});
