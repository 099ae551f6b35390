// kubelet's configuration: the KubeletConfiguration file, the kubeconfig (or
// the bootstrap kubeconfig it trades for one), the cluster CA, and the unit
// drop-in with the flags that have no config-file field (node name, labels).
// Pure: settings in, files (as node paths) out.

import { z } from 'zod';
import { err, ok, type Result } from '../util/result.ts';
import { execLine, renderUnit } from './systemd.ts';
import { absolutePath as absolute, deepMerge, issueLines } from './settings.ts';
import { toYaml } from './yaml.ts';

const LABEL_NAME = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const LABEL_PREFIX = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

const isLabelKey = (key: string): boolean => {
  const slash = key.indexOf('/');
  return slash < 0 ? LABEL_NAME.test(key) : LABEL_PREFIX.test(key.slice(0, slash)) && LABEL_NAME.test(key.slice(slash + 1));
};

/** As the API server checks them: a name of at most 63 characters, after an optional DNS-subdomain prefix. */
export const labelKeySchema = z
  .string()
  .refine(isLabelKey, { error: 'a label key: [prefix/]name, the name at most 63 letters, digits and -_., the prefix a DNS subdomain', abort: true });
export const labelValueSchema = z.string().refine((v) => v === '' || LABEL_NAME.test(v), 'a label value: at most 63 letters, digits and -_., starting and ending with a letter or digit');

/** The labels in kubernetes.io and k8s.io kubelet may set on its own node (k8s.io/kubelet/pkg/apis/well_known_labels.go). */
const KUBELET_LABELS = new Set([
  'kubernetes.io/hostname', 'kubernetes.io/os', 'kubernetes.io/arch', 'beta.kubernetes.io/os', 'beta.kubernetes.io/arch',
  'topology.kubernetes.io/zone', 'topology.kubernetes.io/region', 'failure-domain.beta.kubernetes.io/zone',
  'failure-domain.beta.kubernetes.io/region', 'beta.kubernetes.io/instance-type', 'node.kubernetes.io/instance-type',
]);
const within = (domain: string, parent: string): boolean => domain === parent || domain.endsWith(`.${parent}`);

/** kubelet refuses to start with any other --node-labels key in kubernetes.io or k8s.io (node-role.kubernetes.io/… is set with kubectl). */
export function kubeletMaySet(key: string): boolean {
  const domain = key.includes('/') ? key.slice(0, key.indexOf('/')) : '';
  if (!within(domain, 'kubernetes.io') && !within(domain, 'k8s.io')) return true;
  return KUBELET_LABELS.has(key) || within(domain, 'kubelet.kubernetes.io') || within(domain, 'node.kubernetes.io');
}

export const nodeLabelsSchema = z.record(
  labelKeySchema.refine(kubeletMaySet, 'a label kubelet may set on its node: in kubernetes.io or k8s.io only [*.]node.kubernetes.io/…, [*.]kubelet.kubernetes.io/… and the well-known topology, os, arch and instance-type labels'),
  labelValueSchema,
);

export const taintSchema = z.strictObject({
  key: labelKeySchema,
  value: labelValueSchema.optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']),
});
export type Taint = z.infer<typeof taintSchema>;

/** The API server refuses a node whose taints repeat a key and effect: kubelet would never register it. */
export const taintsSchema = z
  .array(taintSchema)
  .refine((ts) => new Set(ts.map((t) => `${t.key}:${t.effect}`)).size === ts.length, 'a key and effect named twice (the API server refuses the node)');

/**
 * A DNS-1123 subdomain, as the API server takes a node's name; at most 64 characters, since it is also
 * the container's hostname (HOST_NAME_MAX), which runc cannot set otherwise.
 */
export const nodeNameSchema = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'a DNS-1123 node name: lower-case labels of letters, digits and -, joined by dots')
  .max(64, "at most 64 characters: the node name is also the container's hostname");

export const bootstrapTokenSchema = z.string().regex(/^[a-z0-9]{6}\.[a-z0-9]{16}$/, 'a bootstrap token: abcdef.0123456789abcdef');
export const pemCertificateSchema = z.string().includes('-----BEGIN CERTIFICATE-----', { message: 'a PEM certificate' });
export const pemKeySchema = z.string().regex(/-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'a PEM private key');

export const kubeletAuthSchema = z.union([
  /** TLS bootstrap: kubelet trades the token for a client certificate and writes its own kubeconfig. */
  z.strictObject({ bootstrapToken: bootstrapTokenSchema }),
  /** A client certificate and key (PEM text), written under the kubelet's pki directory. */
  z.strictObject({ clientCertificate: pemCertificateSchema, clientKey: pemKeySchema }),
]);
export type KubeletAuth = z.infer<typeof kubeletAuthSchema>;

export const kubeletSettingsSchema = z.strictObject({
  nodeName: nodeNameSchema,
  server: z.url({ protocol: /^https$/ }),
  /** The cluster CA, PEM text. */
  caData: pemCertificateSchema,
  auth: kubeletAuthSchema,
  clusterDNS: z.array(z.union([z.ipv4(), z.ipv6()])).min(1),
  clusterDomain: z.string().default('cluster.local'),
  labels: nodeLabelsSchema.default({}),
  taints: taintsSchema.default([]),
  cgroupDriver: z.enum(['systemd', 'cgroupfs']).default('systemd'),
  containerRuntimeEndpoint: z.string().default('unix:///run/containerd/containerd.sock'),
  /** The kubelet binary inside the container. */
  binary: absolute.default('/usr/local/bin/kubelet'),
  dir: absolute.default('/var/lib/kubelet'),
  /** Merged over the generated KubeletConfiguration, object by object (fields this schema does not name). */
  extra: z.record(z.string(), z.unknown()).default({}),
});
export type KubeletSettings = z.output<typeof kubeletSettingsSchema>;
export type KubeletSettingsInput = z.input<typeof kubeletSettingsSchema>;

export function validateKubeletSettings(input: unknown): Result<KubeletSettings, string[]> {
  const parsed = kubeletSettingsSchema.safeParse(input);
  if (parsed.success) return ok(parsed.data);
  return err(issueLines(parsed.error.issues, ['kubelet']));
}

/** A file for the node, by its path inside the node (shared paths are the same on the host). */
export interface NodeFile {
  readonly path: string;
  readonly content: string;
  readonly mode: number;
}

export function kubeletPaths(s: Pick<KubeletSettings, 'dir'>) {
  return {
    config: `${s.dir}/config.yaml`,
    kubeconfig: `${s.dir}/kubeconfig`,
    bootstrapKubeconfig: `${s.dir}/bootstrap-kubeconfig`,
    ca: `${s.dir}/pki/ca.crt`,
    clientCertificate: `${s.dir}/pki/nodegraph-client.crt`,
    clientKey: `${s.dir}/pki/nodegraph-client.key`,
  };
}

export function kubeletConfiguration(s: KubeletSettings): Record<string, unknown> {
  const paths = kubeletPaths(s);
  const generated = {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: paths.ca },
    },
    authorization: { mode: 'Webhook' },
    cgroupDriver: s.cgroupDriver,
    clusterDNS: s.clusterDNS,
    clusterDomain: s.clusterDomain,
    containerRuntimeEndpoint: s.containerRuntimeEndpoint,
    rotateCertificates: 'bootstrapToken' in s.auth,
    ...(s.taints.length === 0 ? {} : { registerWithTaints: s.taints.map((t) => ({ ...t })) }),
  };
  return deepMerge(generated, s.extra);
}

export function kubeconfig(s: KubeletSettings, user: Record<string, string>): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'cluster', cluster: { server: s.server, 'certificate-authority': kubeletPaths(s).ca } }],
    users: [{ name: 'kubelet', user }],
    contexts: [{ name: 'kubelet', context: { cluster: 'cluster', user: 'kubelet' } }],
    'current-context': 'kubelet',
  };
}

/** The kubelet command line; flags only for what KubeletConfiguration cannot say. */
export function kubeletArgv(s: KubeletSettings): string[] {
  const paths = kubeletPaths(s);
  const argv = [s.binary, `--config=${paths.config}`, `--kubeconfig=${paths.kubeconfig}`];
  if ('bootstrapToken' in s.auth) argv.push(`--bootstrap-kubeconfig=${paths.bootstrapKubeconfig}`);
  argv.push(`--hostname-override=${s.nodeName}`);
  const labels = Object.entries(s.labels).sort(([a], [b]) => a.localeCompare(b));
  if (labels.length > 0) argv.push(`--node-labels=${labels.map(([k, v]) => `${k}=${v}`).join(',')}`);
  return argv;
}

export function kubeletDropIn(s: KubeletSettings): string {
  return renderUnit(
    {
      Unit: { After: 'containerd.service', Wants: 'containerd.service' },
      Service: { ExecStart: ['', execLine(kubeletArgv(s))], Restart: 'always', RestartSec: 5 },
    },
    'Written by nodegraph; edits are replaced on the next apply.',
  );
}

const header = '# Written by nodegraph; edits are replaced on the next apply.\n';

/** The files kubelet reads, in the shared kubelet directory (same path on host and in the container). */
export function kubeletSharedFiles(s: KubeletSettings): NodeFile[] {
  const paths = kubeletPaths(s);
  const files: NodeFile[] = [
    { path: paths.config, content: header + toYaml(kubeletConfiguration(s)), mode: 0o644 },
    { path: paths.ca, content: ensureNewline(s.caData), mode: 0o644 },
  ];
  if ('bootstrapToken' in s.auth) {
    files.push({ path: paths.bootstrapKubeconfig, content: header + toYaml(kubeconfig(s, { token: s.auth.bootstrapToken })), mode: 0o600 });
  } else {
    files.push(
      { path: paths.clientCertificate, content: ensureNewline(s.auth.clientCertificate), mode: 0o644 },
      { path: paths.clientKey, content: ensureNewline(s.auth.clientKey), mode: 0o600 },
      {
        path: paths.kubeconfig,
        content: header + toYaml(kubeconfig(s, { 'client-certificate': paths.clientCertificate, 'client-key': paths.clientKey })),
        mode: 0o600,
      },
    );
  }
  return files;
}

const ensureNewline = (text: string): string => (text.endsWith('\n') ? text : `${text}\n`);
