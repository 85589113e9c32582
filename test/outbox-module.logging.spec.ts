import { Injectable, type INestApplication } from '@nestjs/common';
import {
  OnOutboxEvent,
  OUTBOX_EVENT_DEAD,
  OutboxEngine,
  type OutboxModuleOptions,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, emitCommitted } from './support/outbox-app';
import { memberInvited } from './support/events';
import { LogCapture } from './support/log-capture';

/** What an operator sees in the logs without SQL: failures, dead events, misrouted handlers. */

const PLANTED = 'hunter2-planted';

@Injectable()
class FlakyDownstream {
  @OnOutboxEvent('push-to-crm', { events: ['member.invited'] })
  handle() {
    throw new Error(
      `CRM answered 500 for https://crm:${PLANTED}@crm.example/api password=${PLANTED}`,
    );
  }

  @OnOutboxEvent('dead-alarm', { events: [OUTBOX_EVENT_DEAD] })
  alarm() {}
}

const database = useTestDatabase();

async function start(logs: LogCapture, outbox: OutboxModuleOptions): Promise<INestApplication> {
  return createOutboxApp({
    url: database.db.url,
    outbox: { autoStart: false, retention: { enabled: false }, ...outbox },
    providers: [FlakyDownstream],
    logger: logs,
  });
}

describe('OutboxModule logs', () => {
  it('logs each failed attempt and a newly dead event, scrubbed, and nothing planted in the error', async () => {
    const logs = new LogCapture();
    const app = await start(logs, { maxAttempts: 2, retry: { baseMs: 1, maxMs: 1, jitter: 0 } });
    try {
      const id = await emitCommitted(app, memberInvited());
      const engine = app.get(OutboxEngine);
      await engine.drainOnce();
      await new Promise((resolve) => setTimeout(resolve, 20));
      await engine.drainOnce();

      const failures = logs.matching('warn', `member.invited ${id} failed attempt 1 (push-to-crm)`);
      expect(failures).toHaveLength(1);
      expect(failures[0].message).toContain('push-to-crm: Error: CRM answered 500');
      const dead = logs.matching('error', `member.invited ${id} is dead after 2 attempts`);
      expect(dead).toHaveLength(1);
      expect(dead[0].message).toContain('(failed: push-to-crm)');
      expect(JSON.stringify(logs.lines)).not.toContain(PLANTED);
    } finally {
      await app.close();
      await database.sql.query('TRUNCATE outbox_event');
    }
  });

  it('warns at boot about handlers subscribed to a type the types filter never claims', async () => {
    const logs = new LogCapture();
    const app = await start(logs, { types: ['member.invited'] });
    await app.close();
    const warnings = logs.matching('warn', 'which this instance never claims');
    expect(warnings.map((w) => w.message)).toEqual([
      expect.stringContaining(`dead-alarm subscribe to "${OUTBOX_EVENT_DEAD}"`),
    ]);
  });
});
