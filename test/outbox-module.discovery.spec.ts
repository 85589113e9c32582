import { Controller, Injectable, Scope, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxEngine,
  OutboxPublisher,
  ScopedOutboxHandlerError,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp } from './support/outbox-app';
import { LogCapture } from './support/log-capture';

/**
 * Handlers are found wherever Nest keeps an instance: class, factory and value providers, and
 * controllers. A handler the explorer missed would have its events marked delivered unrun.
 */

const calls: string[] = [];

class FactoryMade {
  @OnOutboxEvent('factory-made', { events: ['thing.happened'] })
  handle() {
    calls.push('factory-made');
  }
}

class ValueGiven {
  @OnOutboxEvent('value-given', { events: ['thing.happened'] })
  handle() {
    calls.push('value-given');
  }
}

@Controller()
class ThingsController {
  @OnOutboxEvent('controller-held', { events: ['thing.happened'] })
  handle() {
    calls.push('controller-held');
  }
}

@Injectable()
class ClassProvided {
  private readonly own = 'class-provided';

  @OnOutboxEvent('class-provided', { events: ['thing.happened'] })
  handle() {
    // `this` is the provider instance.
    calls.push(this.own);
  }
}

const FACTORY = Symbol('factory');
const VALUE = 'value-token';

const database = useTestDatabase();

beforeEach(async () => {
  calls.length = 0;
  await database.sql.query('TRUNCATE outbox_event');
});

async function emitAndDrain(app: INestApplication, type: string): Promise<string> {
  const id = await app
    .get(DataSource)
    .transaction((manager) =>
      app
        .get(OutboxPublisher)
        .emit({ type, aggregateType: 'thing', aggregateId: 't-1', payload: {} }, { manager }),
    );
  const report = await app.get(OutboxEngine).drainOnce();
  expect(report).toMatchObject({ ok: true, claimed: 1, delivered: 1 });
  return id;
}

describe('OutboxModule handler discovery', () => {
  it('runs handlers on factory, value and class providers and on controllers', async () => {
    const logs = new LogCapture();
    const app = await createOutboxApp({
      url: database.db.url,
      outbox: { autoStart: false, retention: { enabled: false } },
      providers: [
        { provide: FACTORY, useFactory: () => new FactoryMade(), inject: [] },
        { provide: VALUE, useValue: new ValueGiven() },
        ClassProvided,
        // The same instance behind a second token must not run twice.
        { provide: 'alias', useExisting: ClassProvided },
      ],
      controllers: [ThingsController],
      logger: logs,
    });
    try {
      const id = await emitAndDrain(app, 'thing.happened');
      expect([...calls].sort()).toEqual([
        'class-provided',
        'controller-held',
        'factory-made',
        'value-given',
      ]);
      const { rows } = await database.sql.query(
        'SELECT deliveries FROM outbox_event WHERE id = $1',
        [id],
      );
      expect(Object.keys(rows[0].deliveries).sort()).toEqual([
        'class-provided',
        'controller-held',
        'factory-made',
        'value-given',
      ]);
      expect(logs.matching('log', 'Outbox handlers: thing.happened ->')).toHaveLength(1);
    } finally {
      await app.close();
    }
  });

  it('a handler on a transient provider registered under a token fails the boot', async () => {
    const failure = await createOutboxApp({
      url: database.db.url,
      outbox: { autoStart: false },
      providers: [{ provide: 'transient', useClass: FactoryMade, scope: Scope.TRANSIENT }],
    }).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ScopedOutboxHandlerError);
    expect((failure as Error).message).toContain('"factory-made" on FactoryMade.handle');
  });

  it('an event type without any handler is delivered, and says so once per type in the log', async () => {
    const logs = new LogCapture();
    const app = await createOutboxApp({
      url: database.db.url,
      outbox: { autoStart: false, retention: { enabled: false } },
      providers: [ClassProvided],
      logger: logs,
    });
    try {
      await emitAndDrain(app, 'nobody.listens');
      await emitAndDrain(app, 'nobody.listens');
      await emitAndDrain(app, 'thing.happened');
      const warnings = logs.matching('warn', 'has no handler in this application');
      expect(warnings.map((w) => w.message)).toEqual([expect.stringContaining('"nobody.listens"')]);
    } finally {
      await app.close();
    }
  });
});
