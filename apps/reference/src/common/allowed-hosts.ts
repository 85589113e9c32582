/**
 * The host names the app answers to (`ALLOWED_HOSTS`), lower-cased and without brackets, so
 * that `[::1]` and `::1` name the same host.
 */
export type AllowedHosts = ReadonlySet<string>;

/** `ALLOWED_HOSTS` as a set of names. */
export function parseAllowedHosts(text: string): AllowedHosts {
  return new Set(
    text
      .split(',')
      .map((name) => normalize(name.trim()))
      .filter((name) => name !== ''),
  );
}

/**
 * The host name of a `Host` header or an origin's host (`name`, `name:port`, `[v6]:port`), or
 * undefined when it is not one.
 */
export function hostNameOf(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined;
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/.exec(host);
  return match ? normalize(match[1]) : undefined;
}

/** Whether `host` (a `Host` header's value) names one of `allowed`. */
export function isAllowedHost(allowed: AllowedHosts, host: string | undefined): boolean {
  const name = hostNameOf(host);
  return name !== undefined && allowed.has(name);
}

function normalize(name: string): string {
  const lower = name.toLowerCase();
  return lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
}
