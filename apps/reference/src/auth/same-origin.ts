import { isAllowedHost, type AllowedHosts } from '../common/allowed-hosts';

interface WithHeaders {
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Whether a browser form came from a page of this app: its `Origin` names the host the request
 * was sent to (the proxy's `X-Forwarded-Host` when there is one, as the dashboard reads it; the
 * host allow-list has checked both), and that host is in ALLOWED_HOSTS (a page on a rebound name
 * never passes).
 * Without an `Origin`, a browser's `Sec-Fetch-Site: same-origin` will do; without both, it is
 * not a form of ours.
 */
export function fromOwnPage(request: WithHeaders, allowed: AllowedHosts): boolean {
  const origin = single(request.headers.origin);
  const host = single(request.headers['x-forwarded-host']) ?? single(request.headers.host);
  if (origin === undefined) return single(request.headers['sec-fetch-site']) === 'same-origin';
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    return false;
  }
  return isAllowedHost(allowed, originHost) && originHost.toLowerCase() === host?.toLowerCase();
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
