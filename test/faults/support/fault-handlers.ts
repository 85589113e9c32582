import { Inject, Injectable } from '@nestjs/common';
import type { Pool } from 'pg';
import {
  OnOutboxEvent,
  OUTBOX_EVENT_DEAD,
  type HandlerContext,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import { breaks } from './breaks';
import type { ChildConfig } from './ipc';

export const FAULT_EVENT = 'fault.work';
/** Goes to the transactional handler alone. */
export const FAULT_TX_EVENT = 'fault.tx';
/** What the transactional handler emits with `ctx.emit`; nobody handles it. */
export const FAULT_FOLLOW_UP_EVENT = 'fault.tx.followed';
/** Goes to the ordered handler and the unordered one beside it. */
export const FAULT_ORDERED_EVENT = 'fault.ordered';
/** Goes to the limited handler alone. */
export const FAULT_LIMITED_EVENT = 'fault.limited';
export const FAULT_RECORDS = Symbol('FAULT_RECORDS');
export const FAULT_CONFIG = Symbol('FAULT_CONFIG');

/** Handler names; every `fault.work` event goes to the first two. */
export const HANDLER_A = 'fault-a';
export const HANDLER_B = 'fault-b';
export const HANDLER_DEAD = 'fault-dead';
export const HANDLER_TX = 'fault-tx';
/** Ordered by key (blocks on a dead head); `fault-audit` gets the same events unordered. */
export const HANDLER_LEDGER = 'fault-ledger';
export const HANDLER_AUDIT = 'fault-audit';
/**
 * At most LIMITED_AT_ONCE runs at once across every worker; a 1 s budget, so a place a killed
 * run never gave back runs out 2 s after its admission.
 */
export const HANDLER_LIMITED = 'fault-limited';
export const LIMITED_AT_ONCE = 3;

export interface FaultPayload {
  /** The handler that always throws for this event (a poison event). */
  failHandler?: string;
  /** How long each handler takes for this event. */
  slowMs?: number;
  /** This handler fails its first try of the event with probability `share`. */
  flaky?: { handler: string; share: number };
  /** Keyed events: which of the producer's loops emitted it, and its place in that loop. */
  producer?: number;
  seq?: number;
}

/**
 * The effect, idempotent the way a real handler would be: check for an earlier effect of this
 * (handler, event) and add one only when there is none, in one statement that also marks the
 * call. Sequential reruns never add a second row; only two runs at the same time (or a broken
 * handler) can, which is what the duplicate-effect count looks for.
 */
const EFFECT = `
  WITH earlier AS (
    SELECT 1 FROM fault_effect WHERE handler = $1 AND event_id = $2 LIMIT 1
  ),
  added AS (
    INSERT INTO fault_effect (handler, event_id, call_id)
    SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM earlier)
    RETURNING 1
  )
  UPDATE fault_call
  SET effect = CASE WHEN EXISTS (SELECT 1 FROM added) THEN 'done' ELSE 'repeat' END,
      ended_at = clock_timestamp()
  WHERE id = $3
`;

/** A call that throws on purpose ends here, so it is not taken for one cut short. */
const FAILED = `UPDATE fault_call SET effect = 'failed', ended_at = clock_timestamp() WHERE id = $1`;

/**
 * Records a call with the time the handler started (this machine's clock, which the database
 * shares), not the time the INSERT ran: a frozen server can run the INSERT of a run it cut short
 * long after, even after the event was delivered by a later run, which is not a second call.
 * $1 handler, $2 event id, $3 pid, $4 attempt, $5 start in ms since the epoch.
 */
const RECORD_CALL = `
  INSERT INTO fault_call (handler, event_id, pid, attempt, at)
  VALUES ($1, $2, $3, $4, to_timestamp($5::float8 / 1000))
  RETURNING id
`;

/**
 * The handlers of a fault worker. Each call is recorded before anything else, autocommitted on
 * a pool of its own (never in the outbox's transaction), so a call survives whatever happens to
 * the outbox afterwards; the runner compares those records with the outbox's `deliveries`.
 */
@Injectable()
export class FaultHandlers {
  inFlight = 0;
  txOpen = 0;
  calls = 0;

  constructor(
    @Inject(FAULT_RECORDS) private readonly records: Pool,
    @Inject(FAULT_CONFIG) private readonly config: ChildConfig,
  ) {}

  @OnOutboxEvent(HANDLER_A, { events: [FAULT_EVENT] })
  a(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  @OnOutboxEvent(HANDLER_B, { events: [FAULT_EVENT] })
  b(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  @OnOutboxEvent(HANDLER_LEDGER, { events: [FAULT_ORDERED_EVENT], ordered: true })
  ledger(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  @OnOutboxEvent(HANDLER_AUDIT, { events: [FAULT_ORDERED_EVENT] })
  audit(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  @OnOutboxEvent(HANDLER_LIMITED, {
    events: [FAULT_LIMITED_EVENT],
    maxConcurrent: LIMITED_AT_ONCE,
    // Within every scenario's lease (the ordering scenario's is 2.5 s) with 1 s to spare.
    timeoutMs: 1000,
  })
  limited(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  @OnOutboxEvent(HANDLER_DEAD, { events: [OUTBOX_EVENT_DEAD] })
  dead(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    return this.run(event, ctx);
  }

  /**
   * A transactional handler with a naive effect: a plain INSERT through `ctx.manager`, no check
   * for an earlier one, and a follow-up event. Only the outbox's transaction keeps it single.
   * It then rests with its transaction open, so kills land between its writes and its COMMIT.
   */
  @OnOutboxEvent(HANDLER_TX, { events: [FAULT_TX_EVENT], transaction: true })
  async tx(event: OutboxEvent<FaultPayload>, ctx: TransactionalHandlerContext): Promise<void> {
    const startedAt = Date.now();
    this.inFlight++;
    this.calls++;
    let written = false;
    try {
      const callId = await this.recordCall(event, ctx, startedAt);
      await ctx.manager.query(
        'INSERT INTO fault_effect (handler, event_id, call_id) VALUES ($1, $2, $3)',
        [ctx.handlerName, event.id, callId],
      );
      await ctx.manager.query(`UPDATE fault_call SET effect = 'done' WHERE id = $1`, [callId]);
      await ctx.emit({
        type: FAULT_FOLLOW_UP_EVENT,
        aggregateType: 'fault',
        aggregateId: event.id,
        payload: {},
      });
      this.txOpen++;
      written = true;
      await sleep(Math.random() * (this.config.handlerDelayMs ?? 0));
    } finally {
      if (written) this.txOpen--;
      this.inFlight--;
    }
  }

  /** Records the call, autocommitted on the records pool, and returns its id. */
  private async recordCall(
    event: OutboxEvent<FaultPayload>,
    ctx: HandlerContext,
    startedAt: number,
  ): Promise<string> {
    const { rows } = await this.records.query<{ id: string }>(RECORD_CALL, [
      ctx.handlerName,
      event.id,
      process.pid,
      ctx.attempt,
      startedAt,
    ]);
    return rows[0].id;
  }

  private async run(event: OutboxEvent<FaultPayload>, ctx: HandlerContext): Promise<void> {
    const startedAt = Date.now();
    this.inFlight++;
    this.calls++;
    try {
      const callId = await this.recordCall(event, ctx, startedAt);
      const payload = event.payload ?? {};
      const failure = failureOf(payload, ctx);
      if (failure) {
        await this.records.query(FAILED, [callId]);
        throw new Error(failure);
      }
      const delayMs = payload.slowMs ?? Math.random() * (this.config.handlerDelayMs ?? 0);
      if (delayMs > 0) await sleep(delayMs);
      if (breaks.skipEffect(this.config.breakMode, ctx.handlerName, event.id)) return;
      await this.records.query(EFFECT, [ctx.handlerName, event.id, callId]);
      if (breaks.doubleEffect(this.config.breakMode, event.id)) {
        await this.records.query(
          'INSERT INTO fault_effect (handler, event_id, call_id) VALUES ($1, $2, $3)',
          [ctx.handlerName, event.id, callId],
        );
      }
    } finally {
      this.inFlight--;
    }
  }
}

/** Why this call fails on purpose (a poison event, a flaky first try), or null. */
function failureOf(payload: FaultPayload, ctx: HandlerContext): string | null {
  if (payload.failHandler === ctx.handlerName)
    return `${ctx.handlerName} always fails for this event`;
  const { flaky } = payload;
  if (
    flaky?.handler === ctx.handlerName &&
    ctx.handlerAttempt === 1 &&
    Math.random() < flaky.share
  ) {
    return `${ctx.handlerName} fails this first try`;
  }
  return null;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
