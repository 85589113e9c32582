import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * The reference app's dashboard guard, for a developer's machine: it lets in requests from this
 * machine only (a loopback peer address), and none that a proxy forwarded. Behind a proxy or in
 * production, mount the dashboard with your own authentication guard instead (an admin session,
 * an SSO header your ingress sets): the page replays and discards events.
 */
@Injectable()
export class LocalOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      socket?: { remoteAddress?: string };
      headers: Record<string, unknown>;
    }>();
    if (request.headers['x-forwarded-for'] !== undefined) return false;
    return LOOPBACK.has(request.socket?.remoteAddress ?? '');
  }
}
