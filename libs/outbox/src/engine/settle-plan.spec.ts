import type { HandlerOutcome } from '../handlers/outbox-handler.types';
import type { HandlerPolicy } from '../handlers/handler.policy';
import type { OutboxRecord } from '../store/lease/lease.types';
import {
  handlerAttempts,
  handlersToRun,
  planSettle,
  settledByHandler,
  type PlannedHandler,
} from './settle-plan';

/** The claim's database time; retry times are read against it. */
const CLAIMED_AT = Date.parse('2026-12-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(CLAIMED_AT + offsetMs).toISOString();

/** A fixed schedule, so that every delay in the tables is exact. */
const policy = (maxAttempts: number, ordered = false): HandlerPolicy => ({
  retry: [1_000, 5_000, 30_000],
  maxAttempts,
  ordered: ordered ? { onDead: 'block' } : null,
});

/** `retry` (3 attempts), `once` (1 attempt), `slow` (5 attempts), `keyed` (ordered, 3). */
const H = {
  retry: { name: 'retry', policy: policy(3) },
  once: { name: 'once', policy: policy(1) },
  slow: { name: 'slow', policy: policy(5) },
  keyed: { name: 'keyed', policy: policy(3, true) },
} satisfies Record<string, PlannedHandler>;

type Lease = 'live' | 'dead replay';

function claimed(
  lease: Lease,
  state: Partial<Pick<OutboxRecord, 'deliveries' | 'failures' | 'held'>> = {},
): OutboxRecord {
  return {
    id: 'e-1',
    attempts: 4,
    claimedAt: new Date(CLAIMED_AT),
    deadAt: lease === 'dead replay' ? new Date(CLAIMED_AT - 60_000) : null,
    deliveries: {},
    failures: {},
    held: [],
    ...state,
  } as OutboxRecord;
}

const ok = (handlerName: string): HandlerOutcome => ({ handlerName, ok: true });
const threw = (handlerName: string): HandlerOutcome => ({
  handlerName,
  ok: false,
  error: new Error('downstream said no'),
  timedOut: false,
});
const overran = (handlerName: string): HandlerOutcome => ({
  handlerName,
  ok: false,
  error: new Error('budget spent'),
  timedOut: true,
});

describe('handlersToRun: which handlers of a claimed event run now', () => {
  it.each<[string, OutboxRecord, PlannedHandler[], string[]]>([
    ['a first try runs every handler', claimed('live'), [H.retry, H.once], ['retry', 'once']],
    [
      'a retry skips the handlers already delivered',
      claimed('live', { deliveries: { once: at(-1) } }),
      [H.retry, H.once],
      ['retry'],
    ],
    [
      'a failed handler whose retry time has come runs',
      claimed('live', { failures: { retry: { count: 1, retryAt: at(0) } } }),
      [H.retry, H.once],
      ['retry', 'once'],
    ],
    [
      'a failed handler whose retry time is later waits',
      claimed('live', { failures: { retry: { count: 1, retryAt: at(1) } } }),
      [H.retry, H.once],
      ['once'],
    ],
    [
      'a handler that used its attempts on a live event runs no more',
      claimed('live', { failures: { once: { count: 1, retryAt: null } } }),
      [H.retry, H.once],
      ['retry'],
    ],
    [
      'an ordered handler held by an earlier event of its key waits',
      claimed('live', { held: ['keyed'] }),
      [H.retry, H.keyed],
      ['retry'],
    ],
    [
      'a dead replay gives every handler left one more try',
      claimed('dead replay', {
        deliveries: { slow: at(-2) },
        failures: { retry: { count: 3, retryAt: null }, once: { count: 1, retryAt: null } },
      }),
      [H.retry, H.once, H.slow],
      ['retry', 'once'],
    ],
    [
      'a dead replay narrowed to some handlers runs those alone',
      claimed('dead replay', {
        failures: { retry: { count: 3, retryAt: at(-1) }, once: { count: 1, retryAt: null } },
      }),
      [H.retry, H.once],
      ['retry'],
    ],
    [
      'a narrowed replay ignores a mark on a handler already delivered',
      claimed('dead replay', {
        deliveries: { retry: at(-2) },
        failures: { retry: { count: 1, retryAt: at(-1) }, once: { count: 1, retryAt: null } },
      }),
      [H.retry, H.once],
      ['once'],
    ],
    [
      'a dead replay still leaves a held ordered handler to its key',
      claimed('dead replay', { held: ['keyed'] }),
      [H.retry, H.keyed],
      ['retry'],
    ],
    [
      'a handler named like an Object.prototype property is not taken as delivered',
      claimed('live'),
      [{ name: 'constructor', policy: policy(3) }],
      ['constructor'],
    ],
  ])('%s', (_case, record, handlers, expected) => {
    expect(handlersToRun(record, handlers).map((h) => h.name)).toEqual(expected);
  });

  it('hands back the same list on a first try, so the hot path builds nothing', () => {
    const handlers = [H.retry, H.once];
    expect(handlersToRun(claimed('live'), handlers)).toBe(handlers);
  });
});

/** The fields of a settle a table row states; `kind` alone for delivered and held ones. */
interface Expected {
  kind: 'delivered' | 'held' | 'failed';
  handlers: string[];
  failures?: { handler: string; count: number; delayMs: number | null }[];
  pending?: string[];
  dead?: boolean;
  failedHandlers?: string[];
  retryDelayMs?: number;
}

/** `retry`'s first failure, alone among the handlers left: back after its first delay. */
const RETRY_FAILED_ONCE = {
  failures: [{ handler: 'retry', count: 1, delayMs: 1_000 }],
  pending: ['retry'],
  dead: false,
  failedHandlers: ['retry'],
  retryDelayMs: 1_000,
};

describe('planSettle: what an attempt writes, by policy × outcome × attempt × lease', () => {
  it.each<[string, OutboxRecord, PlannedHandler[], HandlerOutcome[], Expected]>([
    // Delivered.
    [
      'first try, every handler succeeds: delivered',
      claimed('live'),
      [H.retry, H.once],
      [ok('retry'), ok('once')],
      { kind: 'delivered', handlers: ['retry', 'once'] },
    ],
    [
      'a retry whose last handler succeeds: delivered, naming only it',
      claimed('live', {
        deliveries: { once: at(-1) },
        failures: { retry: { count: 2, retryAt: at(0) } },
      }),
      [H.retry, H.once],
      [ok('retry')],
      { kind: 'delivered', handlers: ['retry'] },
    ],
    [
      'a dead replay that succeeds: delivered',
      claimed('dead replay', { failures: { once: { count: 1, retryAt: null } } }),
      [H.once],
      [ok('once')],
      { kind: 'delivered', handlers: ['once'] },
    ],
    // Retrying.
    [
      'first failure of a 3-attempt handler (thrown): retry after its first delay',
      claimed('live'),
      [H.retry, H.once],
      [threw('retry'), ok('once')],
      {
        kind: 'failed',
        handlers: ['once'],
        ...RETRY_FAILED_ONCE,
      },
    ],
    [
      'a handler over its budget fails like one that threw',
      claimed('live'),
      [H.retry],
      [overran('retry')],
      {
        kind: 'failed',
        handlers: [],
        ...RETRY_FAILED_ONCE,
      },
    ],
    [
      'second failure: the next step of its own schedule',
      claimed('live', { failures: { retry: { count: 1, retryAt: at(0) } } }),
      [H.retry],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        failures: [{ handler: 'retry', count: 2, delayMs: 5_000 }],
        pending: ['retry'],
        dead: false,
        failedHandlers: ['retry'],
        retryDelayMs: 5_000,
      },
    ],
    [
      'a handler that did not run keeps its retry time, which can come first',
      claimed('live', { failures: { slow: { count: 2, retryAt: at(600) } } }),
      [H.retry, H.slow],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        ...RETRY_FAILED_ONCE,
        pending: ['retry', 'slow'],
        // 600 ms after the claim, 100 ms of which have passed.
        retryDelayMs: 500,
      },
    ],
    [
      'one handler used up while another still retries: not dead yet',
      claimed('live'),
      [H.retry, H.once],
      [threw('retry'), threw('once')],
      {
        kind: 'failed',
        handlers: [],
        failures: [
          { handler: 'retry', count: 1, delayMs: 1_000 },
          { handler: 'once', count: 1, delayMs: null },
        ],
        pending: ['retry'],
        dead: false,
        failedHandlers: ['retry', 'once'],
        retryDelayMs: 1_000,
      },
    ],
    // Dead.
    [
      'a 1-attempt handler fails on its first try: dead at once',
      claimed('live'),
      [H.retry, H.once],
      [ok('retry'), threw('once')],
      {
        kind: 'failed',
        handlers: ['retry'],
        failures: [{ handler: 'once', count: 1, delayMs: null }],
        pending: [],
        dead: true,
        failedHandlers: ['once'],
        retryDelayMs: 0,
      },
    ],
    [
      'the last allowed failure of a 3-attempt handler: dead',
      claimed('live', { failures: { retry: { count: 2, retryAt: at(0) } } }),
      [H.retry],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        failures: [{ handler: 'retry', count: 3, delayMs: null }],
        pending: [],
        dead: true,
        failedHandlers: ['retry'],
        retryDelayMs: 0,
      },
    ],
    [
      'dead names every handler left, the used-up one that did not run too',
      claimed('live', {
        failures: { retry: { count: 2, retryAt: at(0) }, once: { count: 1, retryAt: null } },
      }),
      [H.retry, H.once],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        failures: [{ handler: 'retry', count: 3, delayMs: null }],
        pending: [],
        dead: true,
        failedHandlers: ['retry', 'once'],
        retryDelayMs: 0,
      },
    ],
    [
      'a used-up handler that did not run is not pending: the event retries for the other',
      claimed('live', { failures: { once: { count: 1, retryAt: null } } }),
      [H.retry, H.once],
      [overran('retry')],
      {
        kind: 'failed',
        handlers: [],
        ...RETRY_FAILED_ONCE,
      },
    ],
    [
      'a dead replay that fails stays dead, whatever attempts the handler has left',
      claimed('dead replay', { failures: { slow: { count: 1, retryAt: null } } }),
      [H.slow],
      [threw('slow')],
      {
        kind: 'failed',
        handlers: [],
        failures: [{ handler: 'slow', count: 2, delayMs: null }],
        pending: [],
        dead: true,
        failedHandlers: ['slow'],
        retryDelayMs: 0,
      },
    ],
    [
      'a narrowed dead replay that fails names the handlers left, not only those it ran',
      claimed('dead replay', {
        failures: { retry: { count: 3, retryAt: at(-1) }, once: { count: 1, retryAt: null } },
      }),
      [H.retry, H.once],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        failures: [{ handler: 'retry', count: 4, delayMs: null }],
        pending: [],
        dead: true,
        failedHandlers: ['retry', 'once'],
        retryDelayMs: 0,
      },
    ],
    // Held behind an earlier event of the key.
    [
      'all that is left is an ordered handler the key holds: held (parked)',
      claimed('live', { held: ['keyed'] }),
      [H.retry, H.keyed],
      [ok('retry')],
      { kind: 'held', handlers: ['retry'] },
    ],
    [
      'a held handler that used its attempts holds nothing up: dead, not parked',
      claimed('live', { held: ['keyed'], failures: { keyed: { count: 3, retryAt: null } } }),
      [H.retry, H.keyed],
      [ok('retry')],
      {
        kind: 'failed',
        handlers: ['retry'],
        failures: [],
        pending: [],
        dead: true,
        failedHandlers: ['keyed'],
        retryDelayMs: 0,
      },
    ],
    [
      'a failure beside a held handler: retried, not parked',
      claimed('live', { held: ['keyed'] }),
      [H.retry, H.keyed],
      [threw('retry')],
      {
        kind: 'failed',
        handlers: [],
        ...RETRY_FAILED_ONCE,
        pending: ['retry', 'keyed'],
      },
    ],
    [
      'a dead replay whose only handler left is held: held',
      claimed('dead replay', { held: ['keyed'], failures: { keyed: { count: 3, retryAt: null } } }),
      [H.retry, H.keyed],
      [ok('retry')],
      { kind: 'held', handlers: ['retry'] },
    ],
  ])('%s', (_case, record, handlers, outcomes, expected) => {
    const planned = planSettle(record, handlers, outcomes, 100);
    expect(planned.kind).toBe(expected.kind);
    expect(planned.record).toBe(record);
    const { kind: _kind, ...fields } = expected;
    expect(planned.settle).toEqual({ id: 'e-1', attempts: 4, ...fields, ...errorOf(planned) });
  });

  it('writes each failed handler with its scrubbed error, and no error when none failed', () => {
    const planned = planSettle(
      claimed('live'),
      [H.retry, H.slow],
      [threw('retry'), overran('slow')],
      0,
    );
    expect(planned.kind === 'failed' && planned.settle.error).toBe(
      'retry: Error: downstream said no; slow: Error: budget spent',
    );
  });
});

describe('settledByHandler: which runs deliver the event in their own transaction', () => {
  type Handler = PlannedHandler & { isolationLevel: string | undefined };
  const tx: Handler = { ...H.retry, name: 'ledger', isolationLevel: 'READ COMMITTED' };
  const plain: Handler = { ...H.once, name: 'mail', isolationLevel: undefined };
  const other = { ...tx, name: 'audit' };
  const sequenced = { ...claimed('live'), sequenced: true } as OutboxRecord;
  const mailDone = claimed('live', { deliveries: { mail: '2026-12-01T11:00:00.000Z' } });

  it.each<[string, OutboxRecord, Handler[], Handler[], boolean]>([
    ['its one handler, transactional', claimed('live'), [tx], [tx], true],
    ['the one handler left, the others delivered', mailDone, [tx, plain], [tx], true],
    ['a dead replay of its one handler', claimed('dead replay'), [tx], [tx], true],
    ['not a plain handler', claimed('live'), [plain], [plain], false],
    [
      'not with another handler running beside it',
      claimed('live'),
      [tx, plain],
      [tx, plain],
      false,
    ],
    ['not while another waits for its retry', claimed('live'), [tx, plain], [tx], false],
    ['not two transactional handlers', claimed('live'), [tx, other], [tx, other], false],
    ['not an event placed for ordered handlers', sequenced, [tx], [tx], false],
  ])('%s', (_case, record, handlers, toRun, expected) => {
    expect(settledByHandler(record, handlers, toRun)).toBe(expected);
  });
});

describe('handlerAttempts', () => {
  it("gives each failed handler its next try's number, and nothing on a first try", () => {
    expect(handlerAttempts(claimed('live'))).toBeUndefined();
    expect(
      handlerAttempts(
        claimed('live', {
          failures: { retry: { count: 2, retryAt: at(0) }, once: { count: 1, retryAt: null } },
        }),
      ),
    ).toEqual({ retry: 3, once: 2 });
  });
});

/** The planned error, which the row states elsewhere (see the scrubbed-error test). */
function errorOf(planned: ReturnType<typeof planSettle>): { error?: unknown } {
  return planned.kind === 'failed' ? { error: planned.settle.error } : {};
}
