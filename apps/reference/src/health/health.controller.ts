import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { OutboxHealthIndicator, OutboxLivenessIndicator } from '@app/outbox';

/**
 * `GET /health`, readiness for rollouts: down while this pod's outbox engine stops (or is
 * stuck), or the database is gone. Lag and backlog are reported but do not gate readiness: they
 * are the same on every pod, and a slow downstream must not take the whole API out of rotation.
 *
 * `GET /health/live`, liveness: down only when this process cannot make progress (its event loop
 * stalled, its outbox engine wedged), which a restart mends. It has no database check: a restart
 * does not bring a database back, and would turn its outage into a crash loop.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly outbox: OutboxHealthIndicator,
    private readonly outboxLiveness: OutboxLivenessIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.database.pingCheck('database', { timeout: 2000 }),
      () => this.outbox.isHealthy('outbox'),
    ]);
  }

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.outboxLiveness.isAlive('outbox')]);
  }
}
