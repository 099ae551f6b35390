import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALL_CAPABILITIES, bundleConfig, grantableCapabilities, hookPhases, sharedPaths, validateOciSpec, type BundleParams, type OciSpec } from '../../../src/node/bundle.ts';

const KNOWN_GOOD = fileURLToPath(new URL('../../e2e/fixtures/known-good-config.json', import.meta.url));

const params = (over: Partial<BundleParams> = {}): BundleParams => ({
  hostname: 'nodegraph-node',
  rootfs: 'rootfs',
  shared: sharedPaths('/etc/containerd/certs.d').map((destination) => ({ destination, source: `host${destination}` })),
  hostNetwork: false,
  ...over,
});

describe('OCI bundle config.json', () => {
  it('is the e2e suite’s known-good config, given the same choices', () => {
    // The fixture was booted for real (systemd as PID 1 under runc) by test/e2e/smoke.sh,
    // on a host whose bounding set lacks CAP_SYS_RESOURCE (bit 24).
    const knownGood = JSON.parse(readFileSync(KNOWN_GOOD, 'utf8')) as unknown;
    const capabilities = grantableCapabilities('Name:\tx\nCapBnd:\t000001fffeffffff\n');
    expect(bundleConfig(params({ capabilities }))).toEqual(knownGood);
  });

  it('grants the capabilities the caller may pass on, all when it cannot tell', () => {
    expect(grantableCapabilities('CapBnd:\t000001ffffffffff')).toEqual([...ALL_CAPABILITIES]);
    expect(grantableCapabilities('CapBnd:\t000001fffeffffff')).not.toContain('CAP_SYS_RESOURCE');
    expect(grantableCapabilities('CapBnd:\t0000000000000021')).toEqual(['CAP_CHOWN', 'CAP_KILL']);
    expect(grantableCapabilities(undefined)).toHaveLength(41);
  });

  it('shares the host network namespace for a real node', () => {
    const spec = bundleConfig(params({ hostNetwork: true }));
    expect(spec.linux?.namespaces?.map((n) => n.type)).toEqual(['pid', 'ipc', 'uts', 'mount', 'cgroup']);
  });

  it('runs systemd with container=oci, tmpfs on /run, /run/lock and /tmp, and same-path binds', () => {
    const spec = bundleConfig(params({ shared: [{ destination: '/var/lib/kubelet', source: '/srv/root/var/lib/kubelet' }] }));
    expect(spec.process?.args).toEqual(['/sbin/init']);
    expect(spec.process?.env).toContain('container=oci');
    for (const d of ['/run', '/run/lock', '/tmp']) expect(spec.mounts?.find((m) => m.destination === d)?.type).toBe('tmpfs');
    expect(spec.mounts?.find((m) => m.destination === '/var/lib/kubelet')).toEqual({
      destination: '/var/lib/kubelet',
      type: 'bind',
      source: '/srv/root/var/lib/kubelet',
      options: ['rbind', 'rw'],
    });
    expect(spec.linux?.namespaces).toContainEqual({ type: 'cgroup' });
    expect(spec.annotations?.['org.nodegraph.stop-signal']).toBe('SIGRTMIN+3');
  });

  it('grants devices: a node in /dev and a cgroup rule', () => {
    const spec = bundleConfig(params({ devices: [{ path: '/dev/nvidia0', type: 'c', major: 195, minor: 0, fileMode: 0o666, uid: 0, gid: 0 }] }));
    expect(spec.linux?.devices).toEqual([{ path: '/dev/nvidia0', type: 'c', major: 195, minor: 0, fileMode: 0o666, uid: 0, gid: 0 }]);
    expect(spec.linux?.resources?.devices).toContainEqual({ allow: true, type: 'c', major: 195, minor: 0, access: 'rwm' });
    expect(bundleConfig(params()).linux?.devices).toBeUndefined();
  });

  it('keeps the unknown fields of a base config and carries its hooks through intact', () => {
    const hook = { path: '/usr/bin/nvidia-container-runtime-hook', args: ['nvidia-container-runtime-hook', 'prestart'], env: ['A=1'], timeout: 5, vendorField: { x: 1 } };
    const base = {
      ociVersion: '1.1.0',
      vendorTopLevel: { keep: ['me'] },
      process: { user: { uid: 0, gid: 0, additionalGids: [5] }, args: ['sh'], cwd: '/', env: ['TERM=xterm', 'PATH=/bin'], apparmorProfile: 'unconfined', rlimits: [{ type: 'RLIMIT_NOFILE', hard: 1048576, soft: 1048576 }] },
      hooks: { prestart: [hook], poststop: [{ path: '/bin/cleanup' }], futurePhase: [{ path: '/bin/future' }] },
      mounts: [{ destination: '/lib/modules', type: 'bind', source: '/lib/modules', options: ['rbind', 'ro'] }, { destination: '/proc', type: 'proc', source: 'proc', options: ['weird'] }],
      linux: { sysctl: { 'net.ipv4.ip_forward': '1' }, seccomp: { defaultAction: 'SCMP_ACT_ALLOW' }, resources: { memory: { limit: 1073741824 } }, devices: [{ path: '/dev/fuse', type: 'c', major: 10, minor: 229 }] },
      annotations: { 'com.example/a': 'b' },
    };
    const parsed = validateOciSpec(base);
    if (!parsed.ok) throw new Error(parsed.error.join());
    const spec = bundleConfig(params({ base: parsed.value, hooks: { prestart: [{ path: '/bin/extra' }] } })) as OciSpec & Record<string, unknown>;
    expect(spec.ociVersion).toBe('1.1.0');
    expect(spec['vendorTopLevel']).toEqual({ keep: ['me'] });
    expect(spec.process?.['apparmorProfile']).toBe('unconfined');
    expect(spec.process?.rlimits).toEqual(base.process.rlimits);
    expect(spec.process?.env).toEqual(['TERM=xterm', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'container=oci']);
    expect(spec.hooks?.prestart).toEqual([hook, { path: '/bin/extra' }]);
    expect(spec.hooks?.poststop).toEqual([{ path: '/bin/cleanup' }]);
    expect((spec.hooks as Record<string, unknown>)['futurePhase']).toEqual([{ path: '/bin/future' }]);
    expect(spec.linux?.['sysctl']).toEqual({ 'net.ipv4.ip_forward': '1' });
    expect(spec.linux?.['seccomp']).toEqual({ defaultAction: 'SCMP_ACT_ALLOW' });
    expect(spec.linux?.resources?.['memory']).toEqual({ limit: 1073741824 });
    expect(spec.linux?.devices).toEqual(base.linux.devices);
    expect(spec.annotations).toMatchObject({ 'com.example/a': 'b', 'org.nodegraph.stop-signal': 'SIGRTMIN+3' });
    // The node's /proc wins; the base's other mounts come after the node's.
    expect(spec.mounts?.filter((m) => m.destination === '/proc')).toEqual([{ destination: '/proc', type: 'proc', source: 'proc' }]);
    expect(spec.mounts?.at(-1)?.destination).toBe('/lib/modules');
    // What is rendered validates and survives a JSON round trip unchanged.
    const again = validateOciSpec(JSON.parse(JSON.stringify(spec)));
    expect(again.ok && again.value).toEqual(spec);
  });

  it('carries any hooks through unchanged (property)', () => {
    const hook = fc.record(
      { path: fc.stringMatching(/^\/[a-z/]{1,12}$/), args: fc.array(fc.string(), { maxLength: 3 }), env: fc.array(fc.string(), { maxLength: 2 }), timeout: fc.integer({ min: 1, max: 60 }) },
      { requiredKeys: ['path'] },
    );
    const hooks = fc.record(Object.fromEntries(hookPhases.map((p) => [p, fc.array(hook, { maxLength: 3 })])), { requiredKeys: [] });
    fc.assert(
      fc.property(hooks, (h) => {
        const parsed = validateOciSpec({ ociVersion: '1.0.2', hooks: h });
        expect(parsed.ok).toBe(true);
        if (!parsed.ok) return;
        expect(bundleConfig(params({ base: parsed.value })).hooks).toEqual(h);
      }),
    );
  });

  it('rejects a base that is not a runtime config', () => {
    const r = validateOciSpec({ ociVersion: 1, hooks: { prestart: [{ path: 'relative' }] } });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error.join('\n')).toMatch(/hooks\.prestart\.0\.path: a hook path is absolute/);
  });
});
