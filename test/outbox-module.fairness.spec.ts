import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxPublisher,
  type NewOutboxEvent,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { createOutboxApp, eventually, useTestLeftovers } from './support/outbox-app';
import { useTestDatabase } from './support/test-database';

/**
 * A running engine under one partition's flood: an event of another partition, emitted while
 * the flood's backlog is waiting, runs after a few dozen of the flood's events with fair claims,
 * where in due order it runs after all of them. Counted in events, not timed.
 */

const FLOOD = 1_000;
/** Flood events started before the quiet partition emits: the backlog is claimed and queued. */
const FLOOD_BEFORE_QUIET = 100;
const HANDLER_MS = 20;

class Starts {
  flood = 0;
  /** Flood events started when the quiet partition's event started, or undefined. */
  floodAtQuiet: number | undefined;
}

const STARTS = Symbol('Starts');

@Injectable()
class SlowHandler {
  constructor(@Inject(STARTS) private readonly starts: Starts) {}

  @OnOutboxEvent('slow', { events: ['bulk'] })
  async handle(event: OutboxEvent) {
    if (event.organizationId === 'org-A') this.starts.flood++;
    else this.starts.floodAtQuiet ??= this.starts.flood;
    // 20 ms, a call to another service: the flood runs at about 4 slots ÷ 20 ms, so the time a
    // busy machine adds to the quiet event's claim moves the count by few events.
    await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  }
}

const t = useTestDatabase();
const { closeAfterTest } = useTestLeftovers();

beforeEach(async () => {
  await t.sql.query('TRUNCATE outbox_event');
});

function bulk(organizationId: string, i: number): NewOutboxEvent {
  return {
    type: 'bulk',
    aggregateType: 'bulk',
    aggregateId: `${organizationId}-${i}`,
    organizationId,
    payload: { i },
  };
}

/**
 * How many flood events started before the quiet partition's event, emitted mid-flood: counted
 * from when its emit began and from when its transaction had committed.
 */
async function floodAheadOfQuiet(
  outbox: OutboxModuleOptions,
): Promise<{ sinceEmit: number; sinceCommit: number }> {
  const starts = new Starts();
  const app = closeAfterTest(
    await createOutboxApp({
      url: t.db.url,
      outbox: { concurrency: 4, ...outbox },
      providers: [SlowHandler, { provide: STARTS, useValue: starts }],
    }),
  );
  const emit = (events: NewOutboxEvent[]) =>
    app
      .get(DataSource)
      .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
  await emit(Array.from({ length: FLOOD }, (_, i) => bulk('org-A', i)));
  await eventually('the flood is running', () => starts.flood >= FLOOD_BEFORE_QUIET);
  const floodAtEmit = starts.flood;
  await emit([bulk('org-B', 0)]);
  // The flood runs on while the quiet event's transaction commits: on a loaded machine that is
  // tens of events the claim could not have put after it.
  const floodAtCommit = starts.flood;
  await eventually('the quiet event ran', () => starts.floodAtQuiet !== undefined);
  return {
    sinceEmit: starts.floodAtQuiet! - floodAtEmit,
    sinceCommit: starts.floodAtQuiet! - floodAtCommit,
  };
}

describe('fair claims in a running engine', () => {
  it('run a quiet partition’s event after a few dozen of a flood’s queued events, not after the flood', async () => {
    const { sinceCommit } = await floodAheadOfQuiet({});
    // The local queue's events of the flood (about 25 ms of work) and one claim's worth.
    expect(sinceCommit).toBeLessThanOrEqual(50);
  });

  it('run it after the whole flood without them', async () => {
    const { sinceEmit } = await floodAheadOfQuiet({ fairness: { enabled: false } });
    expect(sinceEmit).toBeGreaterThanOrEqual(FLOOD - FLOOD_BEFORE_QUIET - 50);
  });
});
