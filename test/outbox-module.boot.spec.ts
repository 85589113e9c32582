import { Injectable, Scope, type INestApplication } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxHandlerTimeoutError,
  type OutboxModuleOptions,
  EventDispatcher,
  InvalidOutboxHandlerPolicyError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxOptionsError,
  OnOutboxEvent,
  OUTBOX_OPTIONS,
  OutboxEngine,
  OutboxModule,
  OutboxPublisher,
  OutboxTransactionRequiredError,
  ScopedOutboxHandlerError,
  type OutboxEvent,
  type ResolvedOutboxOptions,
} from '@app/outbox';
import { clsTransactionsModule } from './support/cls-transactions';
import { useTestDatabase } from './support/test-database';
import { LogCapture } from './support/log-capture';
import { createOutboxApp, emitCommitted } from './support/outbox-app';

/** What fails the boot, how the module is configured, and the ambient transaction. */

const t = useTestDatabase({ truncateEach: ['outbox_event'] });

const received: string[] = [];

@Injectable()
class Receiver {
  @OnOutboxEvent('receiver', { events: ['thing.happened'] })
  handle(event: OutboxEvent) {
    received.push(event.id);
  }
}

async function bootFailure(
  providers: Array<new (...args: never[]) => unknown>,
  outbox: OutboxModuleOptions = {},
): Promise<Error> {
  const error = await createOutboxApp({
    url: t.db.url,
    outbox: { autoStart: false, ...outbox },
    providers,
  }).then(
    async (app) => {
      await app.close();
      throw new Error('the app booted');
    },
    (e: Error) => e,
  );
  return error;
}

describe('OutboxModule boot failures', () => {
  @Injectable()
  class Camel {
    @OnOutboxEvent('webhookFanout', { events: ['x'] })
    handle() {}
  }
  @Injectable()
  class First {
    @OnOutboxEvent('audit-log', { events: ['invoice.paid', 'x'] })
    handle() {}
  }
  @Injectable()
  class Second {
    @OnOutboxEvent('audit-log', { events: '*' })
    handle() {}
  }
  @Injectable({ scope: Scope.REQUEST })
  class PerRequest {
    @OnOutboxEvent('per-request', { events: ['x'] })
    handle() {}
  }
  @Injectable()
  class Nothing {
    @OnOutboxEvent('nothing', { events: [] })
    handle() {}
  }
  @Injectable()
  class Slow {
    @OnOutboxEvent('slow-export', { events: ['report.requested'], timeoutMs: 60_000 })
    handle() {}
  }

  it.each([
    [
      'a handler name that is not kebab-case fails the boot',
      [Camel],
      InvalidOutboxHandlerNameError,
      'Outbox handler name "webhookFanout" on Camel.handle must be kebab-case (lowercase letters and digits separated by single dashes, for example "webhook-fanout")',
    ],
    [
      'two handlers with one name for the same event type fail the boot',
      [First, Second],
      DuplicateOutboxHandlerError,
      expect.stringMatching(
        /^Outbox handler name "audit-log" is used twice for event type "(invoice\.paid|\*)": First\.handle and Second\.handle; give each handler its own name$/,
      ),
    ],
    [
      'a handler on a request-scoped provider fails the boot',
      [PerRequest],
      ScopedOutboxHandlerError,
      'Outbox handler "per-request" on PerRequest.handle belongs to a request- or transient-scoped provider; outbox handlers run outside any request, so the provider must be a singleton',
    ],
    [
      'an empty events list fails the boot',
      [Nothing],
      EmptyOutboxHandlerEventsError,
      `Outbox handler "nothing" on Nothing.handle subscribes to no event: events must be '*' or a non-empty list of event types, got []`,
    ],
    [
      "a handler's own timeoutMs the lease cannot cover fails the boot, naming the handler, the value and the lease",
      [Slow],
      InvalidOutboxHandlerTimeoutError,
      'Outbox handler "slow-export" on Slow.handle has timeoutMs 60000: it must be an integer from 1, and the lease (leaseMs 60000) must cover it plus 1000 ms to settle, so a claimed event is settled before another instance may claim it',
    ],
  ])('%s', async (_title, providers, errorClass, message) => {
    const error = await bootFailure(providers);
    expect(error).toBeInstanceOf(errorClass);
    expect(error.message).toEqual(message);
  });

  it('one name on different event types is allowed', async () => {
    @Injectable()
    class Split {
      @OnOutboxEvent('fanout', { events: ['a'] })
      a() {}
      @OnOutboxEvent('fanout', { events: ['b'] })
      b() {}
    }
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false },
      providers: [Split],
    });
    await app.close();
  });

  it('the handlers option overrides a handler, is checked like the decorator, and must name a handler', async () => {
    @Injectable()
    class Sender {
      @OnOutboxEvent('webhook-sender', { events: ['webhook.delivery'], retry: [5000] })
      handle() {}
    }
    const bad = await bootFailure([Sender], { handlers: { 'webhook-sender': { retry: [-1] } } });
    expect(bad).toBeInstanceOf(InvalidOutboxHandlerPolicyError);
    expect(bad.message).toContain(
      'Outbox handler "webhook-sender" on Sender.handle (with handlers.webhook-sender of the module options) has retry [-1]',
    );

    const unknown = await bootFailure([Sender], { handlers: { 'webhook-sendr': { retry: [1] } } });
    expect(unknown).toBeInstanceOf(InvalidOutboxOptionsError);
    expect(unknown.message).toContain('handlers.webhook-sendr');
    expect(unknown.message).toContain('no @OnOutboxEvent handler is named "webhook-sendr"');

    const app = await createOutboxApp({
      url: t.db.url,
      outbox: {
        autoStart: false,
        handlers: { 'webhook-sender': { retry: [10, 20], timeoutMs: 50 } },
      },
      providers: [Sender],
    });
    try {
      expect(app.get(EventDispatcher).policies('webhook.delivery')).toEqual([
        {
          name: 'webhook-sender',
          policy: { retry: [10, 20], maxAttempts: 3, ordered: null },
          budgetMs: 50,
        },
      ]);
    } finally {
      await app.close();
    }
  });

  it("an ordered handler's ordering comes from the decorator or the handlers option, checked at boot", async () => {
    @Injectable()
    class Ledger {
      @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
      handle() {}
    }
    const bad = await bootFailure([Ledger], {
      handlers: { ledger: { ordered: { onDead: 'later' } as never } },
    });
    expect(bad).toBeInstanceOf(InvalidOutboxHandlerPolicyError);
    expect(bad.message).toContain(
      `Outbox handler "ledger" on Ledger.handle (with handlers.ledger of the module options) has ordered {"onDead":"later"}`,
    );

    for (const [handlers, ordered] of [
      [undefined, { onDead: 'block' }],
      [{ ledger: { ordered: { onDead: 'skip' } } }, { onDead: 'skip' }],
    ] as const) {
      const app = await createOutboxApp({
        url: t.db.url,
        outbox: { autoStart: false, handlers },
        providers: [Ledger],
      });
      try {
        expect(app.get(EventDispatcher).policies('account.credited')[0].policy.ordered).toEqual(
          ordered,
        );
      } finally {
        await app.close();
      }
    }
  });

  it('invalid options fail forRoot with one error naming every field and value', () => {
    expect(() =>
      OutboxModule.forRoot({ leaseMs: 500, maxAttempts: 0, listen: { channel: 'no way' } }),
    ).toThrow(InvalidOutboxOptionsError);
    expect(() => OutboxModule.forRoot({ leaseMs: 500, maxAttempts: 0 })).toThrow(
      'Invalid OutboxModule options:\n' +
        '  - leaseMs = 500: leaseMs must not be less than 1000\n' +
        '  - maxAttempts = 0: maxAttempts must not be less than 1',
    );
  });

  it('invalid options from forRootAsync fail the boot', async () => {
    const error = await createOutboxApp({
      url: t.db.url,
      outboxModule: OutboxModule.forRootAsync({ useFactory: () => ({ handlerTimeoutMs: 60_000 }) }),
    }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(InvalidOutboxOptionsError);
    expect((error as Error).message).toContain(
      'leaseMs = 60000: leaseMs must cover handlerTimeoutMs (60000) plus 1000 ms to settle',
    );
  });
});

describe('OutboxModule configuration', () => {
  it('forRoot applies the given options over the defaults', async () => {
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false, maxAttempts: 4, types: ['thing.happened'] },
      providers: [Receiver],
    });
    try {
      expect(app.get<ResolvedOutboxOptions>(OUTBOX_OPTIONS)).toMatchObject({
        maxAttempts: 4,
        types: ['thing.happened'],
        leaseMs: 60_000,
      });
      expect(app.get(OutboxEngine).state).toBe('idle');
    } finally {
      await app.close();
    }
  });

  it('reads a tuning knob still set at the top level as its field of tuning, and says so once', async () => {
    const logs = new LogCapture();
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false, batchSize: 7, wakeCoalesceMs: 2, tuning: { idleFloorMs: 5 } },
      providers: [Receiver],
      logger: logs,
    });
    try {
      expect(app.get<ResolvedOutboxOptions>(OUTBOX_OPTIONS).tuning).toMatchObject({
        batchSize: 7,
        wakeCoalesceMs: 2,
        idleFloorMs: 5,
        pollIntervalMs: 60_000,
      });
      expect(logs.matching('warn', 'deprecated').map((l) => l.message)).toEqual([
        'OutboxModule options batchSize, wakeCoalesceMs are deprecated and still read: set tuning.batchSize, tuning.wakeCoalesceMs instead',
      ]);
    } finally {
      await app.close();
    }
  });

  it('forRootAsync reads its options from ConfigService and delivers', async () => {
    received.length = 0;
    const app = await createOutboxApp({
      url: t.db.url,
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ OUTBOX_MAX_ATTEMPTS: '7' })] }),
      ],
      outboxModule: OutboxModule.forRootAsync({
        imports: [ConfigModule],
        inject: [ConfigService],
        useFactory: (config: ConfigService) => ({
          maxAttempts: Number(config.getOrThrow<string>('OUTBOX_MAX_ATTEMPTS')),
          autoStart: false,
        }),
      }),
      providers: [Receiver],
    });
    try {
      expect(app.get<ResolvedOutboxOptions>(OUTBOX_OPTIONS).maxAttempts).toBe(7);
      const thing = { type: 'thing.happened', aggregateType: 't', aggregateId: '1', payload: {} };
      const id = await emitCommitted(app, thing);
      await app.get(OutboxEngine).drainOnce();
      expect(received).toEqual([id]);
    } finally {
      await app.close();
    }
  });
});

describe('OutboxPublisher with @nestjs-cls/transactional', () => {
  let app: INestApplication;

  beforeAll(async () => {
    app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false },
      imports: [clsTransactionsModule()],
      providers: [Receiver],
    });
  });

  afterAll(async () => {
    await app?.close();
  });

  const event = { type: 'thing.happened', aggregateType: 't', aggregateId: '1', payload: { n: 1 } };

  it('joins the ambient transaction: the event commits with it', async () => {
    const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
    const id = await txHost.withTransaction(async () => {
      await txHost.tx.query(`SELECT 1`);
      return app.get(OutboxPublisher).emit(event);
    });
    const { rows } = await t.sql.query('SELECT id FROM outbox_event');
    expect(rows).toEqual([{ id }]);
  });

  it('rolls back with the ambient transaction', async () => {
    const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
    await expect(
      txHost.withTransaction(async () => {
        await app.get(OutboxPublisher).emit(event);
        throw new Error('undo');
      }),
    ).rejects.toThrow('undo');
    const { rows } = await t.sql.query('SELECT id FROM outbox_event');
    expect(rows).toEqual([]);
  });

  it('still refuses to emit when no ambient transaction is active', async () => {
    await expect(app.get(OutboxPublisher).emit(event)).rejects.toThrow(
      OutboxTransactionRequiredError,
    );
    const { rows } = await t.sql.query('SELECT id FROM outbox_event');
    expect(rows).toEqual([]);
  });
});
