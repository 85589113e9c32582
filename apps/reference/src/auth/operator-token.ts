import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { AppConfig } from '../config/app.config';

/** How long a dashboard session lasts after signing in. */
export const DASHBOARD_SESSION_MS = 12 * 3_600_000;

const SESSION = /^(\d{13})\.([A-Za-z0-9_-]{43})$/;

/**
 * The operator token (`OPERATOR_TOKEN`) and the dashboard sessions signed with it. Comparisons
 * are of SHA-256 digests with `timingSafeEqual`: constant time, whatever length was sent. A
 * session is `<expiry>.<HMAC of the expiry>`, keyed by the token, so it needs no store and a
 * new token ends every session.
 */
@Injectable()
export class OperatorToken {
  private readonly digest: Buffer;
  private readonly sessionKey: Buffer;

  constructor(config: ConfigService<AppConfig, true>) {
    const token = config.get('OPERATOR_TOKEN', { infer: true });
    this.digest = sha256(token);
    this.sessionKey = createHmac('sha256', token).update('outbox dashboard session').digest();
  }

  matches(given: string | undefined): boolean {
    return given !== undefined && timingSafeEqual(sha256(given), this.digest);
  }

  /** A new session value, valid for DASHBOARD_SESSION_MS. */
  newSession(now = Date.now()): string {
    const expiresAt = String(now + DASHBOARD_SESSION_MS);
    return `${expiresAt}.${this.sign(expiresAt).toString('base64url')}`;
  }

  /** Whether `value` is a session this token signed and that has not expired. */
  sessionValid(value: string | undefined, now = Date.now()): boolean {
    const match = value === undefined ? null : SESSION.exec(value);
    if (!match) return false;
    const signed = timingSafeEqual(Buffer.from(match[2], 'base64url'), this.sign(match[1]));
    return signed && Number(match[1]) > now;
  }

  private sign(expiresAt: string): Buffer {
    return createHmac('sha256', this.sessionKey).update(expiresAt).digest();
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
