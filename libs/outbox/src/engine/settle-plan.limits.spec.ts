import type { HandlerOutcome } from '../handlers/outbox-handler.types';
import type { HandlerPolicy } from '../handlers/handler.policy';
import type { HeldByLimit } from '../handlers/handler-limits';
import type { OutboxRecord } from '../store/lease/lease.types';
import { planSettle, UNASKED_LIMIT_RETRY_MS, type PlannedHandler } from './settle-plan';

/**
 * planSettle with handlers held back by their limit (`maxConcurrent`, `rate`): neither a
 * failure nor an attempt. The event is due when the limit has room, its other handlers' outcomes
 * recorded as usual.
 */

const CLAIMED_AT = Date.parse('2026-12-01T12:00:00.000Z');
const LEASE_END = new Date(CLAIMED_AT + 30_000);
const ELAPSED_MS = 100;
const at = (offsetMs: number) => new Date(CLAIMED_AT + offsetMs);

const policy = (maxAttempts: number): HandlerPolicy => ({
  retry: [1_000, 5_000, 30_000],
  maxAttempts,
  ordered: null,
});
const H = {
  mail: { name: 'mail', policy: policy(3) },
  webhook: { name: 'webhook', policy: policy(3) },
  once: { name: 'once', policy: policy(1) },
} satisfies Record<string, PlannedHandler>;

function claimed(failures: OutboxRecord['failures'] = {}): OutboxRecord {
  return {
    id: 'e-1',
    attempts: 4,
    claimedAt: new Date(CLAIMED_AT),
    leaseExpiresAt: LEASE_END,
    deadAt: null,
    deliveries: {},
    failures,
    held: [],
  } as unknown as OutboxRecord;
}

const ok = (handlerName: string): HandlerOutcome => ({ handlerName, ok: true });
const threw = (handlerName: string): HandlerOutcome => ({
  handlerName,
  ok: false,
  error: new Error('downstream said no'),
  timedOut: false,
});
const held = (handlerName: string, heldUntil: Date | null): HeldByLimit => ({
  handlerName,
  ok: false,
  heldUntil,
});

describe('planSettle with handlers held by their limit', () => {
  it.each<
    [string, OutboxRecord, PlannedHandler[], (HandlerOutcome | HeldByLimit)[], number, string[]]
  >([
    [
      'its one handler held: due when the limit has room',
      claimed(),
      [H.webhook],
      [held('webhook', at(700))],
      700,
      [],
    ],
    [
      'held beside a handler that succeeded: that one recorded',
      claimed(),
      [H.mail, H.webhook],
      [ok('mail'), held('webhook', at(700))],
      700,
      ['mail'],
    ],
    [
      'the limit could not be asked: a moment later',
      claimed(),
      [H.webhook],
      [held('webhook', null)],
      ELAPSED_MS + UNASKED_LIMIT_RETRY_MS,
      [],
    ],
    [
      'held on its retry: not at its past retry time, at the room',
      claimed({ webhook: { count: 1, retryAt: at(-5_000).toISOString() } }),
      [H.webhook],
      [held('webhook', at(700))],
      700,
      [],
    ],
    [
      'another handler waits for a retry sooner than the room: due then',
      claimed({ mail: { count: 1, retryAt: at(400).toISOString() } }),
      [H.mail, H.webhook],
      [held('webhook', at(700))],
      400,
      [],
    ],
    [
      'the soonest of two held handlers',
      claimed(),
      [H.mail, H.webhook],
      [held('mail', at(900)), held('webhook', at(300))],
      300,
      [],
    ],
  ])('%s', (_case, record, handlers, outcomes, dueInMs, recorded) => {
    const planned = planSettle(record, handlers, outcomes, ELAPSED_MS);
    expect(planned.kind).toBe('limited');
    expect(planned.settle).toEqual({
      id: 'e-1',
      attempts: 4,
      handlers: recorded,
      dueAt: at(dueInMs),
      retryDelayMs: dueInMs - ELAPSED_MS,
      leaseExpiresAt: LEASE_END,
    });
  });

  it('held beside a handler that failed: a failed settle, due at the sooner of its retry and the room', () => {
    const planned = planSettle(
      claimed(),
      [H.mail, H.webhook],
      [threw('mail'), held('webhook', at(600))],
      ELAPSED_MS,
    );
    expect(planned.kind).toBe('failed');
    expect(planned.settle).toMatchObject({
      handlers: [],
      failedHandlers: ['mail'],
      // The failed handler's own retry comes in 1 s; the limit has room in 500 ms from now.
      retryDelayMs: 500,
      // The held handler has no retry time of its own: the limit's room is written beside.
      pending: ['mail'],
      dead: false,
      limitRoomAt: at(600),
    });
  });

  it('keeps an event alive for its held handler when the other one used its attempts', () => {
    const planned = planSettle(
      claimed(),
      [H.once, H.webhook],
      [threw('once'), held('webhook', at(600))],
      ELAPSED_MS,
    );
    expect(planned.kind).toBe('failed');
    expect(planned.settle).toMatchObject({ dead: false, pending: [], retryDelayMs: 500 });
  });
});
