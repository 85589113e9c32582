import { ValidationPipe, type INestApplication } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { HttpAdapterHost } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { parseAllowedHosts } from './common/allowed-hosts';
import { refuseUnknownHosts } from './common/host-allow-list.middleware';
import { requireJsonBodies } from './common/json-bodies-only.middleware';
import { ScrubbingExceptionFilter } from './common/scrubbing-exception.filter';
import { refuseUnstorableInput } from './common/unstorable-input';
import type { AppConfig } from './config/app.config';
import { DASHBOARD_PATH } from './outbox-admin/dashboard-path';

/** What main.ts and the tests both apply to the app, so tests exercise what users run. */
export function configureApp(app: INestApplication): INestApplication {
  const config = app.get<ConfigService<AppConfig, true>>(ConfigService);
  // Before anything else, so a request for a host that is not ours reaches no route.
  app.use(refuseUnknownHosts(parseAllowedHosts(config.get('ALLOWED_HOSTS', { infer: true }))));
  // Before the parsers, so a form posted at the API is refused unread.
  app.use(requireJsonBodies([DASHBOARD_PATH]));
  // The parsers Nest would add at init, added here so the input check can follow them: Nest
  // skips a parser that is already in place. Flat form fields only: the dashboard's forms are.
  const express = app as NestExpressApplication;
  express.useBodyParser('json');
  express.useBodyParser('urlencoded', { extended: false });
  app.use(refuseUnstorableInput);
  app.useGlobalPipes(
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  app.useGlobalFilters(new ScrubbingExceptionFilter(app.get(HttpAdapterHost)));
  return app;
}
