import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { OutboxHealthIndicator } from '@app/outbox';

/** Readiness for rollouts: down while the outbox drains at shutdown, or the database is gone. */
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
      () => this.outbox.isHealthy('outbox', { maxLagMs: 5 * 60_000 }),
    ]);
  }
}
