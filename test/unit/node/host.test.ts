import fc from 'fast-check';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeHost } from '../../../src/node/host.ts';

describe('host root prefix', () => {
  it('puts every node path below the root', () => {
    const host = makeHost('/tmp/node');
    expect(host.path('/var/lib/kubelet')).toBe('/tmp/node/var/lib/kubelet');
    expect(host.path('/')).toBe('/tmp/node');
    expect(makeHost('/').path('/var/lib/kubelet')).toBe('/var/lib/kubelet');
    expect(makeHost().root).toBe('/');
  });

  it('never lets a path escape the root, whatever it holds', () => {
    const host = makeHost('/srv/root');
    const segment = fc.constantFrom('..', '.', 'a', 'b c', '', 'etc', '...');
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), (parts) => {
        const p = host.path(`/${parts.join('/')}`);
        expect(p === '/srv/root' || p.startsWith('/srv/root/')).toBe(true);
      }),
    );
  });

  it('refuses relative paths and roots', () => {
    expect(() => makeHost('relative')).toThrow(/absolute/);
    expect(() => makeHost('/x').path('var/lib')).toThrow(/absolute/);
  });

  it('finds systemd by /run/systemd/system under the root', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'nodegraph-host-'));
    try {
      const host = makeHost(dir);
      expect(host.hasSystemd()).toBe(false);
      mkdirSync(path.join(dir, 'run/systemd/system'), { recursive: true });
      expect(host.hasSystemd()).toBe(true);
      expect(host.exists('/run/systemd')).toBe(true);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
