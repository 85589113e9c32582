import { Module, type DynamicModule } from '@nestjs/common';
import { createDashboardController, OUTBOX_DASHBOARD_PATH } from './dashboard.controller';
import { resolveDashboardOptions, type OutboxDashboardOptions } from './dashboard.options';

/**
 * A small server-rendered page over `OutboxAdmin`: counts, lag, throughput of the last hour, every
 * instance that reports in, dead-letter groups with replay and discard (each confirmed on a page
 * that shows the dry run), and one event whole. No client build, no script: forms and links.
 * Import it next to `OutboxModule` (which must be global, its default, or imported where this
 * module is). It refuses to mount without a guard unless told the page is for local development.
 */
@Module({})
export class OutboxDashboardModule {
  static forRoot(options: OutboxDashboardOptions): DynamicModule {
    const { path, guard } = resolveDashboardOptions(options);
    const providers = [{ provide: OUTBOX_DASHBOARD_PATH, useValue: path === '/' ? '' : path }];
    return {
      module: OutboxDashboardModule,
      controllers: [createDashboardController(path, guard)],
      providers: typeof guard === 'function' ? [...providers, guard] : providers,
    };
  }
}
