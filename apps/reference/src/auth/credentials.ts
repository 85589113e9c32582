import { UnauthorizedException } from '@nestjs/common';

interface WithHeaders {
  headers: Record<string, string | string[] | undefined>;
}

/** The credential of an `Authorization: Bearer <credential>` header, or undefined. */
export function bearerCredential(request: WithHeaders): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer +([\x21-\x7e]{1,512})$/i.exec(header.trim());
  return match?.[1];
}

/** A cookie's value from the `Cookie` header, or undefined. */
export function cookieValue(request: WithHeaders, name: string): string | undefined {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/**
 * The 401 of a request without the credential `wanted` names: the same for a missing and a
 * wrong one, so the answer says nothing about what was sent, with the `WWW-Authenticate` a
 * client expects.
 */
export function unauthorized(
  response: { setHeader?(name: string, value: string): unknown },
  wanted: string,
): never {
  response.setHeader?.('WWW-Authenticate', 'Bearer');
  throw new UnauthorizedException(`missing or wrong credentials: this route needs ${wanted}`);
}
