import type { MigrationInterface } from 'typeorm';
import { CreateOutboxEvent1764400000000 } from './1764400000000-create-outbox-event';
import { OutboxDueIndex1765000000000 } from './1765000000000-outbox-due-index';
import { OutboxEventCausation1766000000000 } from './1766000000000-outbox-event-causation';
import { OutboxHandlerFailures1767000000000 } from './1767000000000-outbox-handler-failures';
import { OutboxDiscard1768000000000 } from './1768000000000-outbox-discard';
import { OutboxDiscardIndexes1768500000000 } from './1768500000000-outbox-discard-indexes';
import { OutboxDispatcherReports1769000000000 } from './1769000000000-outbox-dispatcher';
import { OutboxOrganizationTypeIndex1770000000000 } from './1770000000000-outbox-organization-type-index';
import { OutboxAdminChange1771000000000 } from './1771000000000-outbox-admin-change';
import { OutboxClaimFunction1772000000000 } from './1772000000000-outbox-claim-function';
import { OutboxOrdering1773000000000 } from './1773000000000-outbox-ordering';
import { OutboxOrderingIndexes1773500000000 } from './1773500000000-outbox-ordering-indexes';
import { OutboxClaimPlans1774000000000 } from './1774000000000-outbox-claim-plans';
import { OutboxFairClaims1775000000000 } from './1775000000000-outbox-fair-claims';
import { OutboxFairIndex1775500000000 } from './1775500000000-outbox-fair-index';
import { OutboxHandlerLimits1776000000000 } from './1776000000000-outbox-handler-limits';
import { InvalidOutboxMigrationsOptionsError } from '../outbox.errors';

/** A migration class, as TypeORM's `migrations` option takes it. */
export type OutboxMigration = new () => MigrationInterface;

/**
 * The outbox's migrations, in order: add them to your DataSource's `migrations`. They run in any
 * `migrationsTransactionMode`: in a transaction ('all', TypeORM's default, or 'each') an index is
 * built plainly, outside one ('none') concurrently. For concurrent builds on a big table without
 * changing how the app's own migrations run, see `outboxMigrations({ concurrentIndexes: true })`
 * and `npx nestjs-lease-outbox migrate`.
 */
export const OUTBOX_MIGRATIONS: OutboxMigration[] = [
  CreateOutboxEvent1764400000000,
  OutboxDueIndex1765000000000,
  OutboxEventCausation1766000000000,
  OutboxHandlerFailures1767000000000,
  OutboxDiscard1768000000000,
  OutboxDiscardIndexes1768500000000,
  OutboxDispatcherReports1769000000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxAdminChange1771000000000,
  OutboxClaimFunction1772000000000,
  OutboxOrdering1773000000000,
  OutboxOrderingIndexes1773500000000,
  OutboxClaimPlans1774000000000,
  OutboxFairClaims1775000000000,
  OutboxFairIndex1775500000000,
  OutboxHandlerLimits1776000000000,
];

/** The migrations whose only work is building (and dropping) indexes on `outbox_event`. */
const INDEX_MIGRATIONS: ReadonlySet<OutboxMigration> = new Set<OutboxMigration>([
  OutboxDiscardIndexes1768500000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxOrderingIndexes1773500000000,
  OutboxFairIndex1775500000000,
]);

export interface OutboxMigrationsOptions {
  /**
   * Build the indexes of the index-only migrations concurrently, each such migration outside a
   * transaction (`transaction = false`), so emits and settles go on during each build of a big
   * table. TypeORM refuses a migration that sets its own transaction under its default mode,
   * 'all': use it with `migrationsTransactionMode: 'each'` or 'none', or run
   * `npx nestjs-lease-outbox migrate` (which does this) before the app's own migrations.
   * Default false: every migration runs in the mode the DataSource gives it.
   */
  concurrentIndexes?: boolean;
}

/**
 * The outbox's migrations, as `OUTBOX_MIGRATIONS`, or with `concurrentIndexes` the index-only ones
 * outside a transaction. Same names either way: TypeORM records each once, whichever list ran it.
 */
export function outboxMigrations(options: OutboxMigrationsOptions = {}): OutboxMigration[] {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidOutboxMigrationsOptionsError('options', options, 'an object');
  }
  const concurrentIndexes = options.concurrentIndexes ?? false;
  if (typeof concurrentIndexes !== 'boolean') {
    throw new InvalidOutboxMigrationsOptionsError('concurrentIndexes', concurrentIndexes);
  }
  if (!concurrentIndexes) return [...OUTBOX_MIGRATIONS];
  return OUTBOX_MIGRATIONS.map((migration) =>
    INDEX_MIGRATIONS.has(migration) ? outsideTransaction(migration) : migration,
  );
}

function outsideTransaction(Migration: OutboxMigration): OutboxMigration {
  // The subclass keeps the parent's `name`, which is what TypeORM records and compares.
  return class extends Migration {
    override transaction = false as const;
  };
}

export * from './1764400000000-create-outbox-event';
export * from './1765000000000-outbox-due-index';
export * from './1766000000000-outbox-event-causation';
export * from './1767000000000-outbox-handler-failures';
export * from './1768000000000-outbox-discard';
export * from './1768500000000-outbox-discard-indexes';
export * from './1769000000000-outbox-dispatcher';
export * from './1770000000000-outbox-organization-type-index';
export * from './1771000000000-outbox-admin-change';
export * from './1772000000000-outbox-claim-function';
export * from './1773000000000-outbox-ordering';
export * from './1773500000000-outbox-ordering-indexes';
export * from './1774000000000-outbox-claim-plans';
export * from './1775000000000-outbox-fair-claims';
export * from './1775500000000-outbox-fair-index';
