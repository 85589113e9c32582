import 'reflect-metadata';
import { runDevServer } from './dev-server/dev-server';

/**
 * `npm start`: the reference app on an embedded PostgreSQL unless DATABASE_URL is set. The
 * scaffolding around it (the embedded database, the start checks, the stop order, the
 * walkthrough) lives in `dev-server/`; the app itself is `AppModule` with `configureApp`
 * applied, which is all a deployment's own entry point needs.
 */
runDevServer({
  // Loaded only now, so that a start refused before (a busy port, a data directory in use) says
  // so without loading the whole app first.
  createApp: async (env) => {
    const [{ NestFactory }, { AppModule }, { configureApp }] = await Promise.all([
      import('@nestjs/core'),
      import('./app.module'),
      import('./app.setup'),
    ]);
    // abortOnError: Nest would otherwise abort the process on a failed start, leaving the
    // embedded database running.
    const app = await NestFactory.create(AppModule.forRoot({ env }), { abortOnError: false });
    return configureApp(app);
  },
});
