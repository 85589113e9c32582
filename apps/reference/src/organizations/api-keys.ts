import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * An organization's API key: `oak_<organization id>_<32 random bytes, base64url>`. The id says
 * whose key it is, so checking one reads one row and compares its hash in constant time; the
 * random part is what makes it a secret. Only the SHA-256 of the whole key is stored: the key
 * is random and long, so a fast hash is as good as a slow one and costs nothing per request.
 */
const KEY =
  /^oak_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_[A-Za-z0-9_-]{43}$/;

/** What a key's hash is compared with when there is no stored one, so both take as long. */
const NO_HASH = Buffer.alloc(32);

export function generateApiKey(organizationId: string): string {
  return `oak_${organizationId}_${randomBytes(32).toString('base64url')}`;
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/** The organization a well-formed key names (not yet checked), or undefined. */
export function organizationNamedBy(key: string): string | undefined {
  return KEY.exec(key)?.[1];
}

/** Whether `key` hashes to `stored`, compared in constant time; false without a stored hash. */
export function keyMatches(key: string, stored: Buffer | null | undefined): boolean {
  const matches = timingSafeEqual(hashApiKey(key), stored?.length === 32 ? stored : NO_HASH);
  return matches && stored?.length === 32;
}
