// The package README's example, as an app that installed the packed tarball writes it.
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  OnOutboxEvent,
  OUTBOX_ENTITIES,
  OUTBOX_MIGRATIONS,
  OutboxModule,
  OutboxPublisher,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from 'nestjs-lease-outbox';
import { expectEmitted } from 'nestjs-lease-outbox/testing';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';

export class CreateAuditEntry1700000000000 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      'CREATE TABLE audit_entry (event_id uuid PRIMARY KEY, type text NOT NULL)',
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE audit_entry');
  }
}

@Injectable()
export class AuditLog {
  @OnOutboxEvent('audit-log', { events: '*', transaction: true })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext): Promise<void> {
    await ctx.manager.query('INSERT INTO audit_entry (event_id, type) VALUES ($1, $2)', [
      event.id,
      event.type,
    ]);
  }
}

export const outboxImports = [
  TypeOrmModule.forRoot({
    type: 'postgres',
    url: process.env.DATABASE_URL,
    entities: [...OUTBOX_ENTITIES],
    migrations: [...OUTBOX_MIGRATIONS, CreateAuditEntry1700000000000],
    migrationsRun: true,
    connectTimeoutMS: 5000,
  }),
  OutboxModule.forRoot({ maxAttempts: 10, handlerTimeoutMs: 10_000 }),
];

/** Emits one event in a transaction and waits, at most 20 s, for its audit entry. */
export async function emitAndAwaitDelivery(app: INestApplicationContext): Promise<string> {
  const outbox = app.get(OutboxPublisher);
  const dataSource = app.get(DataSource);
  const invoiceId = String(Date.now());
  const eventId = await dataSource.transaction((manager) =>
    outbox.emit(
      {
        type: 'invoice.paid',
        aggregateType: 'invoice',
        aggregateId: invoiceId,
        payload: { id: invoiceId },
      },
      { manager },
    ),
  );
  const started = Date.now();
  while (Date.now() - started < 20_000) {
    const rows: unknown[] = await dataSource.query(
      'SELECT 1 FROM audit_entry WHERE event_id = $1',
      [eventId],
    );
    if (rows.length === 1) {
      const event = await expectEmitted(dataSource, {
        type: 'invoice.paid',
        payload: { id: invoiceId },
      });
      return `delivered ${event.type} to ${event.deliveredTo.join(', ')} in ${Date.now() - started} ms`;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`event ${eventId} was not delivered within 20 s`);
}
