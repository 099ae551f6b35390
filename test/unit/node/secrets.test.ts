// What of a setting is a secret (src/node/secrets.ts): it goes to a sensitive input, the rest is shown.

import { describe, expect, it } from 'vitest';
import { HIDDEN, splitSecrets, splitUrl } from '../../../src/node/secrets.ts';

describe('secrets in settings', () => {
  it('are the values under a key named like a credential, at any depth, arrays included', () => {
    const extra = { registry: { configs: { 'r.example.com': { auth: { username: 'u', password: 'p' }, tls: { insecure_skip_verify: true } } } }, list: [{ identitytoken: 't' }], timeout: '4h' };
    expect(splitSecrets(extra)).toEqual({
      shown: { registry: { configs: { 'r.example.com': { auth: HIDDEN, tls: { insecure_skip_verify: true } } } }, list: [{ identitytoken: HIDDEN }], timeout: '4h' },
      secret: { '["registry","configs","r.example.com","auth"]': { username: 'u', password: 'p' }, '["list",0,"identitytoken"]': 't' },
    });
    expect(splitSecrets({ headers: { 'X-Api-Key': ['k'] } })).toEqual({ shown: { headers: { 'X-Api-Key': HIDDEN } }, secret: { '["headers","X-Api-Key"]': ['k'] } });
    expect(splitSecrets({ version: 2, plugins: {} })).toEqual({ shown: { version: 2, plugins: {} }, secret: undefined });
  });

  it("are a URL's userinfo and query; a plain URL or a file name is shown as it is", () => {
    expect(splitUrl('https://u:p@dl.example.com/kubelet?token=t#x')).toEqual({ shown: `https://${HIDDEN}@dl.example.com/kubelet?${HIDDEN}#x`, secret: 'https://u:p@dl.example.com/kubelet?token=t#x' });
    expect(splitUrl('https://u@dl.example.com/a')).toEqual({ shown: `https://${HIDDEN}@dl.example.com/a`, secret: 'https://u@dl.example.com/a' });
    expect(splitUrl('https://dl.example.com/a')).toEqual({ shown: 'https://dl.example.com/a', secret: undefined });
    expect(splitUrl('/srv/kubelet?x')).toEqual({ shown: '/srv/kubelet?x', secret: undefined });
    expect(splitUrl('https://u:p@bad host/a')).toEqual({ shown: `https://${HIDDEN}`, secret: 'https://u:p@bad host/a' });
  });
});
