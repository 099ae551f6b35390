// The secrets inside settings that are otherwise plain: a registry's
// credentials in containerd's `extra`, a token or userinfo in a download URL.
// A task takes the shown part as a plain value input (a plan diffs it) and the
// secret part as a sensitive one (a plan says only that it changed, the state
// keeps a keyed digest), so a change to either still re-runs the task.

/** What stands where a secret was. */
export const HIDDEN = '(sensitive)';

/** Keys whose values are credentials (containerd's registry `auth`, `password`, `identitytoken`, …). */
const SECRET_KEY = /passw(or)?d|token|auth|secret|credential|(private|api)[_-]?key/i;

export interface SplitSecrets<T> {
  readonly shown: T;
  /** The hidden values by their path (a JSON array of keys), or undefined when there is none. */
  readonly secret: Record<string, unknown> | undefined;
}

/** `value` with every value under a key named like a credential (at any depth) replaced by HIDDEN, and those values apart. */
export function splitSecrets<T>(value: T): SplitSecrets<T> {
  const secret: Record<string, unknown> = {};
  const walk = (v: unknown, at: readonly (string | number)[]): unknown => {
    if (Array.isArray(v)) return v.map((item, i) => walk(item, [...at, i]));
    if (typeof v !== 'object' || v === null) return v;
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(v)) {
      if (SECRET_KEY.test(k)) {
        secret[JSON.stringify([...at, k])] = item;
        out[k] = HIDDEN;
      } else out[k] = walk(item, [...at, k]);
    }
    return out;
  };
  const shown = walk(value, []) as T;
  return { shown, secret: Object.keys(secret).length === 0 ? undefined : secret };
}

/**
 * A URL with its userinfo and query hidden (either may carry a token: `https://user:pass@host/…`, a
 * presigned `?X-Amz-Signature=…`), and the whole URL as the secret; a file name or a plain URL as it is.
 */
export function splitUrl(source: string): { readonly shown: string; readonly secret: string | undefined } {
  if (!/^https?:\/\//i.test(source)) return { shown: source, secret: undefined };
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    return { shown: `${source.slice(0, source.indexOf('//') + 2)}${HIDDEN}`, secret: source };
  }
  if (url.username === '' && url.password === '' && url.search === '') return { shown: source, secret: undefined };
  const user = url.username !== '' || url.password !== '' ? `${HIDDEN}@` : '';
  const query = url.search !== '' ? `?${HIDDEN}` : '';
  return { shown: `${url.protocol}//${user}${url.host}${url.pathname}${query}${url.hash}`, secret: source };
}
