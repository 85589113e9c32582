import { ValidationPipe, type INestApplication } from '@nestjs/common';

/** What main.ts and the tests both apply to the app, so tests exercise what users run. */
export function configureApp(app: INestApplication): INestApplication {
  app.useGlobalPipes(
    new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }),
  );
  return app;
}
