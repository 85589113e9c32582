import ipaddr from 'ipaddr.js';

/**
 * Ranges ipaddr.js 1.x counts as unicast that are no public host either: benchmarking
 * (198.18.0.0/15), IPv6 discard-only (100::/64), the deprecated site-local (fec0::/10) and
 * IPv4-compatible (::/96, `[::127.0.0.1]`) ranges, local-use NAT64 (64:ff9b:1::/48), and the
 * IPv6 documentation and special-purpose ranges (2001:20::/28, 3fff::/20, 5f00::/16).
 */
const ALSO_INTERNAL: ReadonlyArray<[string, [ipaddr.IPv4 | ipaddr.IPv6, number]]> = [
  ['benchmarking', ipaddr.parseCIDR('198.18.0.0/15')],
  ['discard-only', ipaddr.parseCIDR('100::/64')],
  ['site-local', ipaddr.parseCIDR('fec0::/10')],
  ['IPv4-compatible', ipaddr.parseCIDR('::/96')],
  ['local-use NAT64', ipaddr.parseCIDR('64:ff9b:1::/48')],
  ['ORCHIDv2', ipaddr.parseCIDR('2001:20::/28')],
  ['documentation', ipaddr.parseCIDR('3fff::/20')],
  ['segment routing', ipaddr.parseCIDR('5f00::/16')],
];

/**
 * Why a webhook may not be sent to `address` (an IP address as text): the name of its range
 * (`loopback`, `private`, `linkLocal`, `carrierGradeNat`, `uniqueLocal`, `multicast`,
 * `unspecified`, `reserved`, ...), or undefined for a public unicast address. An IPv4 address
 * written as IPv6 (`::ffff:127.0.0.1`) is judged as the IPv4 address it is; anything that is not
 * an address at all is refused as `not an IP address`.
 */
export function internalRange(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(address.replace(/^\[(.*)\]$/, '$1'));
  } catch {
    return 'not an IP address';
  }
  const range = parsed.range();
  if (range !== 'unicast') return range;
  // Same kind on both sides, so the IPv4 signature stands for either.
  const extra = ALSO_INTERNAL.find(
    ([, cidr]) =>
      cidr[0].kind() === parsed.kind() &&
      (parsed as ipaddr.IPv4).match(cidr as [ipaddr.IPv4, number]),
  );
  return extra?.[0];
}

/** A webhook destination refused: an address inside, or a name that resolves to one. */
export class InternalDestinationError extends Error {
  override name = 'InternalDestinationError';

  constructor(
    readonly host: string,
    readonly address: string,
    readonly range: string,
  ) {
    super(
      // The address a name resolved to stays out of the text a tenant reads: it would map
      // names only the app's resolver knows (split-horizon DNS, cluster names).
      host === address
        ? `${address} is a ${range} address`
        : `${host} resolves to a ${range} address`,
    );
  }
}
