import { parse as parseToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  containerdConfigSchema,
  containerdDocument,
  renderContainerdConfig,
  registryMirrorsSchema,
  renderHostsFiles,
  validateContainerdSettings,
} from '../../../src/node/containerd.ts';
import { conflist, conflistSchema, renderConflist, validateCniSettings } from '../../../src/node/cni.ts';
import { kubeletDropIn, kubeletSharedFiles, validateKubeletSettings, type KubeletSettingsInput } from '../../../src/node/kubelet.ts';
import { execLine, quoteWord, renderUnit, validateUnit } from '../../../src/node/systemd.ts';

const settings = (over: object = {}) => {
  const r = validateContainerdSettings(over);
  if (!r.ok) throw new Error(r.error.join('\n'));
  return r.value;
};

describe('containerd config.toml', () => {
  it('renders schema version 2 that parses back to the same table', () => {
    const s = settings({ sandboxImage: 'registry.k8s.io/pause:3.10' });
    const text = renderContainerdConfig(s);
    const parsed = parseToml(text);
    expect(parsed).toEqual(containerdDocument(s));
    expect(containerdConfigSchema.safeParse(parsed).success).toBe(true);
    const cri = (parsed['plugins'] as Record<string, Record<string, unknown>>)['io.containerd.grpc.v1.cri']!;
    expect(cri['sandbox_image']).toBe('registry.k8s.io/pause:3.10');
    expect(cri['registry']).toEqual({ config_path: '/etc/containerd/certs.d' });
    expect(cri['containerd']).toMatchObject({ runtimes: { runc: { runtime_type: 'io.containerd.runc.v2', options: { SystemdCgroup: true } } } });
  });

  it('renders schema version 3 for containerd 2', () => {
    const parsed = parseToml(renderContainerdConfig(settings({ version: 3 })));
    expect(parsed['version']).toBe(3);
    const plugins = parsed['plugins'] as Record<string, unknown>;
    expect(plugins['io.containerd.cri.v1.images']).toMatchObject({ registry: { config_path: '/etc/containerd/certs.d' } });
    expect(plugins['io.containerd.cri.v1.runtime']).toMatchObject({ cni: { bin_dir: '/opt/cni/bin' } });
  });

  it('merges extra settings table by table', () => {
    const parsed = parseToml(renderContainerdConfig(settings({ extra: { plugins: { 'io.containerd.grpc.v1.cri': { enable_unprivileged_ports: true } }, oom_score: -999 } })));
    const cri = (parsed['plugins'] as Record<string, Record<string, unknown>>)['io.containerd.grpc.v1.cri']!;
    expect(cri['enable_unprivileged_ports']).toBe(true);
    expect(cri['sandbox_image']).toBe('registry.k8s.io/pause:3.9');
    expect(parsed['oom_score']).toBe(-999);
  });

  it('refuses a null in extra settings by its path, as TOML has none', () => {
    const r = validateContainerdSettings({ extra: { plugins: { 'io.containerd.grpc.v1.cri': { x: [1, null], y: null } } } });
    expect(r.ok ? [] : r.error).toEqual([
      'containerd.extra.plugins["io.containerd.grpc.v1.cri"].x.1: a TOML value (TOML has no null)',
      'containerd.extra.plugins["io.containerd.grpc.v1.cri"].y: a TOML value (TOML has no null)',
    ]);
  });

  it('rejects what containerd would not take', () => {
    const r = validateContainerdSettings({ version: 4, certsDir: 'relative' });
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error.join('\n')).toMatch(/containerd\.version/);
    expect(!r.ok && r.error.join('\n')).toMatch(/containerd\.certsDir: an absolute path/);
  });

  it('writes one hosts.toml per registry, mirrors in order', () => {
    const files = renderHostsFiles({
      'docker.io': ['https://mirror-a.example.com', { url: 'https://mirror-b.example.com', capabilities: ['pull'], skipVerify: true }],
      'registry.k8s.io': ['http://10.0.0.5:5000'],
    });
    expect([...files.keys()]).toEqual(['docker.io/hosts.toml', 'registry.k8s.io/hosts.toml']);
    const docker = parseToml(files.get('docker.io/hosts.toml')!);
    expect(docker['server']).toBe('https://registry-1.docker.io');
    const hosts = docker['host'] as Record<string, unknown>;
    expect(Object.keys(hosts)).toEqual(['https://mirror-a.example.com', 'https://mirror-b.example.com']);
    expect(hosts['https://mirror-b.example.com']).toEqual({ capabilities: ['pull'], skip_verify: true });
    expect(parseToml(files.get('registry.k8s.io/hosts.toml')!)['server']).toBe('https://registry.k8s.io');
  });

  it('takes a registry host only as a folder inside certs.d', () => {
    const hosts = (registry: string) => registryMirrorsSchema.safeParse({ [registry]: ['https://mirror.example.com'] }).success;
    expect(['docker.io', 'myreg:5000', '10.0.0.5:5000', '_default'].map(hosts)).toEqual([true, true, true, true]);
    expect(['..', '.', '..:5000', '.hidden', '-x'].map(hosts)).toEqual([false, false, false, false, false]);
  });

  it('round-trips any sandbox image and directory through TOML', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.stringMatching(/^\/[a-z0-9/._-]{0,20}$/), (image, dir) => {
        const s = settings({ sandboxImage: image, certsDir: dir });
        expect(parseToml(renderContainerdConfig(s))).toEqual(containerdDocument(s));
      }),
    );
  });
});

const kubelet = (over: Partial<KubeletSettingsInput> = {}) => {
  const r = validateKubeletSettings({
    nodeName: 'node-a',
    server: 'https://10.0.0.1:6443',
    caData: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----',
    auth: { bootstrapToken: 'abcdef.0123456789abcdef' },
    clusterDNS: ['10.96.0.10'],
    ...over,
  });
  if (!r.ok) throw new Error(r.error.join('\n'));
  return r.value;
};

describe('kubelet configuration', () => {
  it('writes a KubeletConfiguration that parses back, with taints', () => {
    const files = kubeletSharedFiles(kubelet({ taints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }], extra: { maxPods: 50 } }));
    const config = files.find((f) => f.path === '/var/lib/kubelet/config.yaml')!;
    const parsed = parseYaml(config.content) as Record<string, unknown>;
    expect(parsed).toMatchObject({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      clusterDNS: ['10.96.0.10'],
      clusterDomain: 'cluster.local',
      cgroupDriver: 'systemd',
      registerWithTaints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }],
      authentication: { x509: { clientCAFile: '/var/lib/kubelet/pki/ca.crt' } },
      maxPods: 50,
    });
  });

  it('writes a bootstrap kubeconfig, private, for a token', () => {
    const files = kubeletSharedFiles(kubelet());
    const boot = files.find((f) => f.path === '/var/lib/kubelet/bootstrap-kubeconfig')!;
    expect(boot.mode).toBe(0o600);
    const parsed = parseYaml(boot.content) as { clusters: { cluster: Record<string, string> }[]; users: { user: Record<string, string> }[] };
    expect(parsed.clusters[0]!.cluster).toEqual({ server: 'https://10.0.0.1:6443', 'certificate-authority': '/var/lib/kubelet/pki/ca.crt' });
    expect(parsed.users[0]!.user).toEqual({ token: 'abcdef.0123456789abcdef' });
    expect(files.some((f) => f.path === '/var/lib/kubelet/kubeconfig')).toBe(false);
  });

  it('quotes the strings a YAML 1.1 reader (Go yaml.v2, as kubelet loads its config) would take for booleans or numbers', () => {
    const taints = [{ key: 'gpu', value: 'yes', effect: 'NoSchedule' as const }, { key: 'spot', value: 'off', effect: 'NoExecute' as const }];
    const files = kubeletSharedFiles(kubelet({ taints, clusterDomain: 'on', extra: { featureGates: { y: true }, podPidsLimit: 1_000, note: '1_000', at: '12:30', dot: '.', nan: '.NaN' } }));
    const text = files.find((f) => f.path === '/var/lib/kubelet/config.yaml')!.content;
    const asYaml11 = parseYaml(text, { version: '1.1' }) as Record<string, unknown>;
    expect(asYaml11).toMatchObject({ registerWithTaints: taints, clusterDomain: 'on', featureGates: { y: true }, podPidsLimit: 1000, note: '1_000', at: '12:30', dot: '.', nan: '.NaN' });
    expect(parseYaml(text)).toEqual(asYaml11);
  });

  it('merges extra settings object by object, so a field beside ours keeps ours', () => {
    const files = kubeletSharedFiles(kubelet({ extra: { authentication: { webhook: { cacheTTL: '2m' } }, evictionHard: { 'memory.available': '200Mi' } } }));
    const parsed = parseYaml(files.find((f) => f.path === '/var/lib/kubelet/config.yaml')!.content) as Record<string, unknown>;
    expect(parsed['authentication']).toEqual({
      anonymous: { enabled: false },
      webhook: { enabled: true, cacheTTL: '2m' },
      x509: { clientCAFile: '/var/lib/kubelet/pki/ca.crt' },
    });
    expect(parsed['evictionHard']).toEqual({ 'memory.available': '200Mi' });
  });

  it('writes a kubeconfig with a client certificate instead', () => {
    const auth = { clientCertificate: '-----BEGIN CERTIFICATE-----\nCERT', clientKey: '-----BEGIN EC PRIVATE KEY-----\nKEY' };
    const files = kubeletSharedFiles(kubelet({ auth }));
    expect(files.map((f) => [f.path, f.mode])).toEqual([
      ['/var/lib/kubelet/config.yaml', 0o644],
      ['/var/lib/kubelet/pki/ca.crt', 0o644],
      ['/var/lib/kubelet/pki/nodegraph-client.crt', 0o644],
      ['/var/lib/kubelet/pki/nodegraph-client.key', 0o600],
      ['/var/lib/kubelet/kubeconfig', 0o600],
    ]);
  });

  it('puts node name and labels on the command line of the drop-in', () => {
    const text = kubeletDropIn(kubelet({ labels: { 'node.example.com/pool': 'blue', zone: 'a' } }));
    expect(text).toContain('ExecStart=\n');
    expect(text).toContain(
      'ExecStart=/usr/local/bin/kubelet --config=/var/lib/kubelet/config.yaml --kubeconfig=/var/lib/kubelet/kubeconfig --bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig --hostname-override=node-a --node-labels=node.example.com/pool=blue,zone=a\n',
    );
  });

  it('rejects a bad token, a bad label and a missing DNS address', () => {
    const r = validateKubeletSettings({ nodeName: 'Node_A', server: 'http://x', caData: 'x', auth: { bootstrapToken: 'nope' }, clusterDNS: [] });
    expect(r.ok).toBe(false);
    const text = !r.ok ? r.error.join('\n') : '';
    for (const field of ['kubelet.nodeName', 'kubelet.server', 'kubelet.caData', 'kubelet.auth', 'kubelet.clusterDNS']) expect(text).toContain(field);
  });
});

describe('CNI conflist', () => {
  it('renders a bridge network that parses back and validates', () => {
    const r = validateCniSettings({ podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] });
    if (!r.ok) throw new Error(r.error.join());
    const parsed = JSON.parse(renderConflist(r.value));
    expect(parsed).toEqual(conflist(r.value));
    expect(conflistSchema.safeParse(parsed).success).toBe(true);
    expect(parsed.plugins[0].ipam.ranges).toEqual([[{ subnet: '10.244.1.0/24' }], [{ subnet: 'fd00:10:244:1::/64' }]]);
    expect(parsed.plugins[0].ipam.routes).toEqual([{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
  });

  it('keeps extra plugins as given', () => {
    const r = validateCniSettings({ extraPlugins: [{ type: 'bandwidth', capabilities: { bandwidth: true } }] });
    expect(r.ok && conflist(r.value).plugins.at(-1)).toEqual({ type: 'bandwidth', capabilities: { bandwidth: true } });
  });

  it('rejects a bad CIDR', () => {
    expect(validateCniSettings({ podCIDRs: ['10.0.0.0/33'] }).ok).toBe(false);
  });

  it('rejects a CNI version the plugins would not take (a v, two parts)', () => {
    const version = (cniVersion: string) => validateCniSettings({ cniVersion });
    expect([version('v1.0.0'), version(''), version('1.0')].map((r) => (r.ok ? '' : r.error.join()))).toEqual(Array(3).fill('cni.cniVersion: a CNI spec version like 1.0.0'));
    expect(version('0.4.0').ok).toBe(true);
  });
});

describe('systemd units', () => {
  it('renders sections and repeated keys in order', () => {
    expect(renderUnit({ Unit: { Description: 'x', After: 'a.service' }, Service: { ExecStart: ['', '/bin/true'], Delegate: true, RestartSec: 5 } }, 'header')).toBe(
      '# header\n\n[Unit]\nDescription=x\nAfter=a.service\n\n[Service]\nExecStart=\nExecStart=/bin/true\nDelegate=yes\nRestartSec=5\n',
    );
  });

  it('rejects values that would break the file', () => {
    expect(validateUnit({ Service: { ExecStart: 'a\nExecStartPre=/bin/evil' } }).ok).toBe(false);
    expect(validateUnit({ 'Bad Section': {} }).ok).toBe(false);
  });

  it('quotes Exec words so systemd reads them back literally', () => {
    expect(quoteWord('/usr/bin/runc')).toBe('/usr/bin/runc');
    expect(quoteWord('100%')).toBe('100%%');
    expect(quoteWord('$HOME')).toBe('$$HOME');
    expect(quoteWord('a b')).toBe('"a b"');
    expect(quoteWord('')).toBe('""');
    expect(execLine(['/bin/echo', 'a "b"'])).toBe('/bin/echo "a \\"b\\""');
  });

  it('has the container unit pass systemd the stop signal it halts on', async () => {
    const { containerUnit } = await import('../../../src/node/supervise.ts');
    const text = containerUnit({ id: 'kube1', runc: { binary: '/usr/sbin/runc' }, bundle: '/var/lib/nodegraph/containers/kube1', consoleLog: '/x', stopTimeoutSeconds: 60 });
    expect(text).toContain('ExecStart=/usr/sbin/runc run --bundle /var/lib/nodegraph/containers/kube1 kube1\n');
    expect(text).toContain('KillSignal=SIGRTMIN+3\n');
    expect(text).toContain('ExecStopPost=-/usr/sbin/runc delete --force kube1\n');
    expect(text).toContain('Delegate=yes\n');
  });
});

