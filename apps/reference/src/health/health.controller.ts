import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { OutboxHealthIndicator } from '@app/outbox';

/**
 * Readiness for rollouts: down while this pod's outbox dispatcher stops (or is stuck), or the
 * database is gone. Lag and backlog are reported but do not gate readiness: they are the same on
 * every pod, and a slow downstream must not take the whole API out of rotation.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: TypeOrmHealthIndicator,
    private readonly outbox: OutboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.database.pingCheck('database', { timeout: 2000 }),
      () => this.outbox.isHealthy('outbox'),
    ]);
  }
}
