import {
  type CanActivate,
  type ExecutionContext,
  ForbiddenException,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { parseAllowedHosts, type AllowedHosts } from '../common/allowed-hosts';
import type { AppConfig } from '../config/app.config';
import { DASHBOARD_PATH } from '../outbox-admin/dashboard-path';
import { bearerCredential, cookieValue } from './credentials';
import { OperatorToken } from './operator-token';
import { fromOwnPage } from './same-origin';

/** The cookie that carries a dashboard session (see OperatorToken). */
export const SESSION_COOKIE = 'outbox_session';

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/**
 * The dashboard's guard: an operator signed in (a session cookie set by the sign-in page from
 * the operator token) or a client with `Authorization: Bearer $OPERATOR_TOKEN`.
 *
 * What it protects: the page and its replay and discard forms from anyone without the operator
 * token, wherever the app listens; with the Host allow-list, from a page on a name rebound to
 * this address (its `Host` is refused before this guard runs). A form post must also come from
 * a page of this app on an allowed host (`Origin`), so another site cannot post with the
 * operator's cookie (which is SameSite=Strict as well).
 *
 * What it does not protect: the token itself. Anyone who has it is an operator, and over plain
 * HTTP it and the cookie cross the network readable: put TLS in front anywhere but loopback. It
 * does not limit sign-in attempts: the token is random and long, not a password to guess.
 */
@Injectable()
export class DashboardSessionGuard implements CanActivate {
  private readonly allowedHosts: AllowedHosts;

  constructor(
    private readonly token: OperatorToken,
    config: ConfigService<AppConfig, true>,
  ) {
    this.allowedHosts = parseAllowedHosts(config.get('ALLOWED_HOSTS', { infer: true }));
  }

  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      method: string;
      headers: Record<string, string | string[] | undefined>;
    }>();
    const signedIn =
      this.token.matches(bearerCredential(request)) ||
      this.token.sessionValid(cookieValue(request, SESSION_COOKIE));
    if (!signedIn) {
      throw new UnauthorizedException(`sign in at ${DASHBOARD_PATH}/login with the operator token`);
    }
    if (!SAFE_METHODS.has(request.method) && !fromOwnPage(request, this.allowedHosts)) {
      throw new ForbiddenException('the form did not come from this page');
    }
    return true;
  }
}
