// For apps with the optional companions: the health indicator through Terminus, and the
// retention sweep registered with the app's SchedulerRegistry.
import type { INestApplicationContext } from '@nestjs/common';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { OUTBOX_RETENTION_JOB, OutboxHealthIndicator } from 'nestjs-lease-outbox';

export const companionImports = [ScheduleModule.forRoot(), TerminusModule];

/** Lines to print; throws when health is not ok or the sweep is not registered. */
export async function checkCompanions(app: INestApplicationContext): Promise<string[]> {
  const indicator = app.get(OutboxHealthIndicator);
  const health = await app.get(HealthCheckService).check([() => indicator.isHealthy('outbox')]);
  if (health.status !== 'ok') throw new Error(`health is ${health.status}`);
  const intervals = app.get(SchedulerRegistry).getIntervals();
  if (!intervals.includes(OUTBOX_RETENTION_JOB)) throw new Error('no retention job registered');
  return [
    `health ${health.status}, outbox ${health.details.outbox?.status}`,
    `retention sweep registered as ${OUTBOX_RETENTION_JOB}`,
  ];
}
