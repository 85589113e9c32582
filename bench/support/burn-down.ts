import type { INestApplication } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { OutboxEngine } from '../../libs/outbox/src';
import { countDelivered, waitUntilSettled } from './database';
import { count } from './report';

export interface BurnDown {
  /** Events delivered per second, from the engine's start to the last settle. */
  rate: number;
  delivered: number;
  /** Every live row was settled within the timeout. */
  complete: boolean;
}

/**
 * Starts the app's engine on the backlog in the table and waits until no live row is left,
 * or `timeoutMs` passes: then the rate is over what was delivered so far.
 */
export async function timeBurnDown(
  app: INestApplication,
  sql: Client,
  events: number,
  timeoutMs: number,
): Promise<BurnDown> {
  const started = performance.now();
  await app.get(OutboxEngine).start();
  const complete = await waitUntilSettled(sql, timeoutMs);
  const seconds = (performance.now() - started) / 1000;
  const delivered = complete ? events : await countDelivered(sql);
  return { rate: delivered / seconds, delivered, complete };
}

/** `1,234 events/s (20,000 delivered)`, saying so when not all were within the timeout. */
export function describeBurnDown(run: BurnDown, timeoutMs: number): string {
  return (
    `${count(run.rate)} events/s (${count(run.delivered)} delivered` +
    `${run.complete ? '' : `, not all within ${timeoutMs / 1000} s`})`
  );
}
