import type { CanActivate, Type } from '@nestjs/common';
import { InvalidOutboxDashboardOptionsError } from '../../outbox.errors';

export interface OutboxDashboardOptions {
  /** Where the page is served. Default `/outbox/ui`. */
  path?: string;
  /**
   * Who may see the page and act on it: a guard class (resolved in the dashboard's module, so
   * it may inject what your app exports globally) or instance. Required, unless `unguarded`.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * `'local-development'` mounts the page without a guard: anyone who reaches the port can replay
   * and discard events. Never in production.
   */
  unguarded?: 'local-development';
}

export interface ResolvedDashboardOptions {
  path: string;
  guard: Type<CanActivate> | CanActivate | undefined;
}

/** Checks the options at `forRoot`, so a page without protection fails the boot. */
export function resolveDashboardOptions(options: OutboxDashboardOptions): ResolvedDashboardOptions {
  const { path = '/outbox/ui', guard, unguarded } = options ?? {};
  if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$|^\/$/.test(path)) {
    throw new InvalidOutboxDashboardOptionsError(
      'path',
      path,
      'an absolute URL path such as /outbox/ui, without a trailing slash',
    );
  }
  if (unguarded !== undefined && unguarded !== 'local-development') {
    throw new InvalidOutboxDashboardOptionsError('unguarded', unguarded, "'local-development'");
  }
  const isGuard =
    typeof guard === 'function' ||
    (typeof guard === 'object' && guard !== null && typeof guard.canActivate === 'function');
  if (guard !== undefined && !isGuard) {
    throw new InvalidOutboxDashboardOptionsError(
      'guard',
      guard,
      'a CanActivate guard class or instance',
    );
  }
  if (guard === undefined && unguarded === undefined) {
    throw new InvalidOutboxDashboardOptionsError(
      'guard',
      guard,
      "a guard: the page replays and discards events (or unguarded: 'local-development' on a developer's machine)",
    );
  }
  if (guard !== undefined && unguarded !== undefined) {
    throw new InvalidOutboxDashboardOptionsError(
      'unguarded',
      unguarded,
      'absent when a guard is given',
    );
  }
  return { path, guard };
}
