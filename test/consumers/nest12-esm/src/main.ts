// A Nest 12 ES module app with the current companions, its health endpoint's indicator and a
// ScheduleModule that the retention sweep registers with.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { OUTBOX_RETENTION_JOB, OutboxHealthIndicator } from 'nestjs-lease-outbox';
import { AuditLog, emitAndAwaitDelivery, outboxImports } from './example.js';

@Module({
  imports: [ScheduleModule.forRoot(), TerminusModule, ...outboxImports],
  providers: [AuditLog],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
try {
  console.log(`nest12-esm: ${await emitAndAwaitDelivery(app)}`);
  const indicator = app.get(OutboxHealthIndicator);
  const health = await app.get(HealthCheckService).check([() => indicator.isHealthy('outbox')]);
  console.log(`nest12-esm: health ${health.status}, outbox ${health.details.outbox?.status}`);
  if (health.status !== 'ok') throw new Error(`health is ${health.status}`);
  const intervals = app.get(SchedulerRegistry).getIntervals();
  if (!intervals.includes(OUTBOX_RETENTION_JOB)) throw new Error('no retention job registered');
  console.log(`nest12-esm: retention sweep registered as ${OUTBOX_RETENTION_JOB}`);
} finally {
  await app.close();
}
