import { Body, Controller, Get, Post, Req, Res } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { Request, Response } from 'express';
import { parseAllowedHosts, type AllowedHosts } from '../common/allowed-hosts';
import type { AppConfig } from '../config/app.config';
import { DASHBOARD_PATH } from '../outbox-admin/dashboard-path';
import { SESSION_COOKIE } from './dashboard-session.guard';
import { DASHBOARD_SESSION_MS, OperatorToken } from './operator-token';
import { fromOwnPage } from './same-origin';
import { SignInForm } from './sign-in.form';
import { SIGN_IN_HEADERS, signInPage } from './sign-in.page';

const SIGN_IN_PATH = `${DASHBOARD_PATH}/login`;

/**
 * Where a browser becomes an operator: the page takes the operator token once and answers with
 * a session cookie for the dashboard (HttpOnly, SameSite=Strict, under the dashboard's path
 * only), so the token is not kept in the browser. Only a form of this page may post it.
 */
@Controller(SIGN_IN_PATH)
export class DashboardSignInController {
  private readonly allowedHosts: AllowedHosts;

  constructor(
    private readonly token: OperatorToken,
    config: ConfigService<AppConfig, true>,
  ) {
    this.allowedHosts = parseAllowedHosts(config.get('ALLOWED_HOSTS', { infer: true }));
  }

  @Get()
  page(@Res() response: Response): void {
    send(response, 200, signInPage(SIGN_IN_PATH, false));
  }

  @Post()
  signIn(@Req() request: Request, @Body() form: SignInForm, @Res() response: Response): void {
    if (!fromOwnPage(request, this.allowedHosts)) {
      send(response, 403, signInPage(SIGN_IN_PATH, false));
      return;
    }
    if (!this.token.matches(form.token)) {
      send(response, 401, signInPage(SIGN_IN_PATH, true));
      return;
    }
    response.cookie(SESSION_COOKIE, this.token.newSession(), {
      httpOnly: true,
      sameSite: 'strict',
      // Behind a proxy that ends TLS the socket is plain HTTP: the page's own scheme decides.
      // A forged header can only make the cookie stricter.
      secure: request.secure || request.headers['x-forwarded-proto'] === 'https',
      path: DASHBOARD_PATH,
      maxAge: DASHBOARD_SESSION_MS,
    });
    for (const [name, value] of SIGN_IN_HEADERS) response.setHeader(name, value);
    response.redirect(303, DASHBOARD_PATH);
  }
}

function send(response: Response, status: number, html: string): void {
  for (const [name, value] of SIGN_IN_HEADERS) response.setHeader(name, value);
  response.status(status).send(html);
}
