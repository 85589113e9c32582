import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { InternalDestinationError, internalRange } from './destination-address';

/** The longest a registration waits for its URL's name to resolve. */
const LOOKUP_DEADLINE_MS = 5_000;

export const WEBHOOK_DESTINATIONS_OPTIONS = Symbol('WEBHOOK_DESTINATIONS_OPTIONS');

export interface WebhookDestinationsOptions {
  /** `WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1`: every address is allowed (local development). */
  allowPrivateAddresses: boolean;
}

/**
 * Where webhooks may go: public unicast addresses only, so that a tenant cannot aim the sender
 * at this machine, the cluster, a cloud metadata service or anything else inside. Checked at
 * registration (`check`) and again for the address actually dialled (`lookup`, given to the
 * HTTP request), since a name may resolve elsewhere by the time a delivery is sent.
 */
export class WebhookDestinations {
  constructor(private readonly options: WebhookDestinationsOptions) {}

  /** Fails with InternalDestinationError when `hostname` is, or resolves to, an inside address. */
  async check(hostname: string): Promise<void> {
    if (this.options.allowPrivateAddresses) return;
    const host = bare(hostname);
    if (isIP(host)) return this.checkLiteral(host);
    const addresses = await new Promise<LookupAddress[]>((resolve, reject) => {
      // A resolver that never answers must not hold the registration: the lookup goes on in
      // the background, the request gets its 400.
      const deadline = setTimeout(
        () => reject(Object.assign(new Error('no answer'), { code: 'ETIMEOUT' })),
        LOOKUP_DEADLINE_MS,
      );
      dnsLookup(host, { all: true }, (error, found) => {
        clearTimeout(deadline);
        if (error) reject(error);
        else resolve(found);
      });
    });
    refuseInternal(host, addresses);
  }

  /**
   * Fails with InternalDestinationError when `hostname` is an inside IP address. A name passes:
   * it is checked when it is looked up.
   */
  checkLiteral(hostname: string): void {
    const host = bare(hostname);
    if (this.options.allowPrivateAddresses || !isIP(host)) return;
    refuseInternal(host, [{ address: host, family: isIP(host) }]);
  }

  /**
   * The `lookup` of an outgoing request: Node's, refusing any answer with an inside address.
   * An IP address in the URL is never looked up, so `checkLiteral` must have passed it first.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      try {
        if (!this.options.allowPrivateAddresses) refuseInternal(hostname, addresses);
      } catch (refused) {
        return callback(refused as NodeJS.ErrnoException, '', 0);
      }
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/** Throws for the first inside address; a name with any of them is refused whole. */
function refuseInternal(host: string, addresses: LookupAddress[]): void {
  for (const { address } of addresses) {
    const range = internalRange(address);
    if (range) throw new InternalDestinationError(host, address, range);
  }
}

/** A URL's hostname without the brackets of an IPv6 address. */
export function bare(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1');
}
