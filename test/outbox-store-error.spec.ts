import { inspect } from 'node:util';
import { OutboxStoreError } from '@app/outbox';
import { OutboxEmitStore } from '@app/outbox/store/emit/emit.store';
import { useTestDatabase } from './support/test-database';

/**
 * A failed statement must not carry its parameters anywhere a log could print them: the
 * enqueue's parameters are the whole payload, secrets included.
 */

const PLANTED = 'planted-secret-7f3a91';

const database = useTestDatabase();
let repo: OutboxEmitStore;

beforeAll(() => {
  repo = new OutboxEmitStore(database.db.dataSource);
});

/** Every way an error is usually written out: inspect (console, Nest's logger), JSON, text. */
function everyRendering(error: unknown): string {
  return [
    inspect(error, { depth: 20, showHidden: true }),
    JSON.stringify(error),
    String(error),
    (error as Error).stack ?? '',
  ].join('\n');
}

describe('OutboxStoreError', () => {
  it('keeps the SQLSTATE and the constraint but never the failed query or its parameters', async () => {
    const runner = database.db.dataSource.createQueryRunner();
    await runner.connect();
    await runner.query(
      `ALTER TABLE outbox_event ADD CONSTRAINT no_secret_type CHECK (type <> 'secret.event')`,
    );
    try {
      await runner.startTransaction();
      const result = await repo.enqueue(runner.manager, {
        type: 'secret.event',
        aggregateType: 'endpoint',
        aggregateId: 'e-1',
        payload: { url: `https://hooks.example/x?token=${PLANTED}`, secret: PLANTED },
        metadata: { note: PLANTED },
      });
      await runner.rollbackTransaction();

      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.error).toBeInstanceOf(OutboxStoreError);
      expect(result.error).toMatchObject({
        operation: 'enqueue',
        code: '23514',
        constraint: 'no_secret_type',
      });
      expect(result.error.cause).toBeUndefined();
      const rendered = everyRendering(result.error);
      expect(rendered).toContain('no_secret_type');
      expect(rendered).not.toContain(PLANTED);
      expect(rendered).not.toMatch(/INSERT INTO/i);
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.query(`ALTER TABLE outbox_event DROP CONSTRAINT no_secret_type`);
      await runner.release();
    }
  });
});
