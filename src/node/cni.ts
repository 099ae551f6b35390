// The CNI network configuration list (a .conflist) for the node's pods: by
// default a bridge with host-local addresses and port mapping. A cluster
// whose network add-on writes its own configuration turns this off.

import { z } from 'zod';
import { err, ok, type Result } from '../util/result.ts';
import { issueLines } from './settings.ts';

const cidr = z.union([z.cidrv4(), z.cidrv6()]);

export const cniSettingsSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/).default('nodegraph'),
  bridge: z.string().regex(/^[A-Za-z0-9_.-]{1,15}$/, 'an interface name (at most 15 characters)').default('cni0'),
  podCIDRs: z.array(cidr).min(1).default(['10.88.0.0/16']),
  /** As the plugins compare it: `1.0.0`, no `v`. */
  cniVersion: z.string().regex(/^[0-9]+\.[0-9]+\.[0-9]+$/, 'a CNI spec version like 1.0.0').default('1.0.0'),
  /** Plugins placed after the bridge, as-is (e.g. bandwidth, firewall). */
  extraPlugins: z.array(z.looseObject({ type: z.string() })).default([]),
});
export type CniSettings = z.output<typeof cniSettingsSchema>;
export type CniSettingsInput = z.input<typeof cniSettingsSchema>;

export function validateCniSettings(input: unknown): Result<CniSettings, string[]> {
  const parsed = cniSettingsSchema.safeParse(input ?? {});
  if (parsed.success) return ok(parsed.data);
  return err(issueLines(parsed.error.issues, ['cni']));
}

/** The parts of a conflist nodegraph relies on; plugin fields beyond `type` are kept. */
export const conflistSchema = z.looseObject({
  cniVersion: z.string(),
  name: z.string(),
  plugins: z.array(z.looseObject({ type: z.string() })).min(1),
});
export type Conflist = z.infer<typeof conflistSchema>;

export function conflist(s: CniSettings): Conflist {
  const v6 = (c: string): boolean => c.includes(':');
  return {
    cniVersion: s.cniVersion,
    name: s.name,
    plugins: [
      {
        type: 'bridge',
        bridge: s.bridge,
        isGateway: true,
        ipMasq: true,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: s.podCIDRs.map((subnet) => [{ subnet }]),
          routes: [
            ...(s.podCIDRs.some((c) => !v6(c)) ? [{ dst: '0.0.0.0/0' }] : []),
            ...(s.podCIDRs.some(v6) ? [{ dst: '::/0' }] : []),
          ],
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
      ...s.extraPlugins,
    ],
  };
}

export const renderConflist = (s: CniSettings): string => `${JSON.stringify(conflist(s), null, 2)}\n`;

/** Where the conflist goes in the container. */
export const conflistPath = (s: Pick<CniSettings, 'name'>, confDir = '/etc/cni/net.d'): string => `${confDir}/10-${s.name}.conflist`;
