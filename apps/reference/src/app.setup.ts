import { ValidationPipe, type INestApplication } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { ScrubbingExceptionFilter } from './common/scrubbing-exception.filter';
import { refuseUnstorableInput } from './common/unstorable-input';

/** What main.ts and the tests both apply to the app, so tests exercise what users run. */
export function configureApp(app: INestApplication): INestApplication {
  // The parsers Nest would add at init, added here so the input check can follow them: Nest
  // skips a parser that is already in place.
  const express = app as NestExpressApplication;
  express.useBodyParser('json');
  express.useBodyParser('urlencoded', { extended: true });
  app.use(refuseUnstorableInput);
  app.useGlobalPipes(
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  app.useGlobalFilters(new ScrubbingExceptionFilter(app.get(HttpAdapterHost)));
  return app;
}
