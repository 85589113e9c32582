import type { EntityManager } from 'typeorm';
import { OutboxEventConflictError, OutboxTransactionRequiredError } from '../../outbox.errors';
import type { NewOutboxEvent } from '../../outbox-event.types';
import { ok, type OutboxResult } from '../outbox.result';
import { ClientStore } from '../store.client';
import {
  ENQUEUE_MAX_ROWS,
  FIND_CONFLICTING,
  WAKE,
  conflictParameters,
  enqueueParameters,
  enqueueStatement,
  namesPartition,
  wakeParameters,
} from './enqueue.sql';
import { toOutboxRow, type OutboxRow } from './outbox-event.validator';
import { SEQUENCE, sequenceParameters, type SequencedEvent } from '../ordering/sequence.sql';
import { orderingKeyOf } from '../event-row.mapping';

/** The ordered handlers an event of a type goes to, as the emit sequences it. */
export interface TypeOrdering {
  orderedHandlers: readonly string[];
  /** Every handler of the type is ordered. */
  parkable: boolean;
}

/**
 * What the emit asks of the handler registry: how events of a type are ordered, if at all. An
 * abstract class so that it is also the injection token: the emit layer names no handler code.
 */
export abstract class EventOrdering {
  abstract orderingOf(type: string): TypeOrdering | undefined;
}

export interface EnqueueOptions {
  /**
   * Queue a NOTIFY with the events (delivered at COMMIT). Default true; false when the caller
   * coalesces wakes and sends one itself (`wake()`).
   */
  notify?: boolean;
  /**
   * Without `notify`: told the wake payload the NOTIFY would have carried (the transaction's
   * `now()` in epoch ms), for the caller's own wake.
   */
  dueFrom?: (epochMs: number) => void;
  /** Sequences the events that ordered handlers receive (see `SEQUENCE`). */
  ordering?: EventOrdering;
}

/** What an enqueue did with one event. */
export interface EnqueuedEvent {
  id: string;
  /** The id was already present with the same content; nothing was written for it. */
  duplicate: boolean;
}

/**
 * The emit store (`OutboxPublisher`'s): writes events through the caller's transaction and
 * wakes the running instances. Misuse (no transaction, a bad event) throws before any write; database
 * failures come back as `{ ok: false, error }`.
 */
export class OutboxEmitStore extends ClientStore {
  /**
   * Writes events through the caller's transaction in one statement and queues a NOTIFY on the
   * same connection, so listeners wake only after COMMIT. Returns, in input order, each id and
   * whether it was already present (`duplicate`: the same event emitted again, kept as it was).
   * Throws `OutboxEventConflictError` when an id is present with different content; the caller's
   * transaction should then roll back.
   */
  async enqueue(
    manager: EntityManager,
    events: NewOutboxEvent | readonly NewOutboxEvent[],
    options: EnqueueOptions = {},
  ): Promise<OutboxResult<EnqueuedEvent[]>> {
    if (!manager.queryRunner?.isTransactionActive) {
      throw new OutboxTransactionRequiredError('OutboxEmitStore.enqueue');
    }
    const rows = (Array.isArray(events) ? events : [events]).map(toOutboxRow);
    const notify = options.notify ?? true;
    const inserted = new Set<string>();
    for (let start = 0; start < rows.length; start += ENQUEUE_MAX_ROWS) {
      const chunk = rows.slice(start, start + ENQUEUE_MAX_ROWS);
      const partitioned = namesPartition(chunk);
      const result = await this.client.runIn(
        'enqueue',
        manager,
        enqueueStatement(chunk.length, notify, partitioned),
        enqueueParameters(chunk, notify ? this.client.channel : null, partitioned),
        (written: { id: string; due_from?: string }[]) => {
          for (const row of written) inserted.add(row.id);
          const dueFrom = written[0]?.due_from;
          if (dueFrom !== undefined) options.dueFrom?.(Number(dueFrom));
        },
      );
      if (!result.ok) return result;
    }
    // An id repeated within one call is written once; its later copies are duplicates of it.
    const seen = new Set<string>();
    const duplicates: OutboxRow[] = [];
    const sequenced: SequencedEvent[] = [];
    const enqueued = rows.map((row) => {
      const duplicate = !inserted.has(row.id) || seen.has(row.id);
      seen.add(row.id);
      if (duplicate) duplicates.push(row);
      else {
        const ordering = options.ordering?.orderingOf(row.type);
        if (ordering) sequenced.push({ id: row.id, key: orderingKeyOf(row), ...ordering });
      }
      return { id: row.id, duplicate };
    });
    if (sequenced.length > 0) {
      const result = await this.client.runIn(
        'enqueue',
        manager,
        SEQUENCE,
        sequenceParameters(sequenced),
        () => undefined,
      );
      if (!result.ok) return result;
    }
    if (duplicates.length > 0) {
      const conflicts = await this.client.runIn(
        'enqueue',
        manager,
        FIND_CONFLICTING,
        conflictParameters(duplicates),
        (found: { id: string; type: string }[]) => found,
      );
      if (!conflicts.ok) return conflicts;
      const [conflict] = conflicts.value;
      if (conflict) throw new OutboxEventConflictError(conflict.id, conflict.type);
    }
    return ok(enqueued);
  }

  /**
   * Sends a NOTIFY on the channel now, on a connection of its own (a coalesced trailing wake),
   * naming the earliest due time of the rows it wakes for when the caller knows it.
   */
  async wake(dueFrom: number | null = null): Promise<OutboxResult<void>> {
    return this.client.run(
      'wake',
      WAKE,
      wakeParameters(this.client.channel, dueFrom),
      () => undefined,
    );
  }
}
