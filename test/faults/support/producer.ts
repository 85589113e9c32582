import type { DataSource, EntityManager } from 'typeorm';
import type { NewOutboxEvent, OutboxPublisher } from '@app/outbox';
import {
  FAULT_EVENT,
  FAULT_LIMITED_EVENT,
  FAULT_ORDERED_EVENT,
  FAULT_TX_EVENT,
  HANDLER_LEDGER,
  type FaultPayload,
} from './fault-handlers';
import type { EmitReport, EventKind, KeyedTransaction, StreamReport } from './ipc';

/** The aggregate of keyed events: their key is `fault-key:<key>`. */
export const KEY_AGGREGATE = 'fault-key';

/**
 * Emits `fault.work` events the way an application does: through OutboxPublisher inside a
 * transaction that also writes a business row (`fault_emitted`). That row is the suite's record
 * of what was produced: it exists exactly when the transaction committed, whatever the client
 * saw, so a commit whose acknowledgement was lost in a fault still counts.
 *
 * Keyed events (`fault.ordered`) come from numbered loops, each committing its transactions one
 * after another, so a loop's commit order is the order of the `seq` it writes in the payload.
 */
export class Producer {
  private stream: { stop: boolean; done: Promise<StreamReport> } | undefined;
  /** The next `seq` of each keyed loop, kept across commands. */
  private readonly seqs = new Map<number, number>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly publisher: OutboxPublisher,
  ) {}

  async emit(count: number, batch: number, kind: EventKind, slowMs?: number): Promise<EmitReport> {
    const report: EmitReport = { committed: 0, failed: 0, ids: [] };
    for (let done = 0; done < count; done += batch) {
      const size = Math.min(batch, count - done);
      try {
        report.ids.push(...(await this.emitBatch(size, kind, slowMs)));
        report.committed += size;
      } catch {
        report.failed += size;
      }
    }
    return report;
  }

  /**
   * Emits `batch` events per transaction at about `perSecond` until stopped; failures are retried
   * by the next batch. With `slow`, that share of the batches are `slow` events of `slow.ms`.
   * With `ids`, the report lists every event whose commit was acknowledged.
   */
  startStream(
    perSecond: number,
    batch: number,
    kind: EventKind = 'work',
    slow?: { share: number; ms: number },
    ids = false,
  ): void {
    this.begin(
      1,
      (1000 * batch) / perSecond,
      () =>
        slow && Math.random() < slow.share
          ? this.emitBatch(batch, 'slow', slow.ms)
          : this.emitBatch(batch, kind),
      ids,
    );
  }

  /**
   * `producers` loops at `perSecond` transactions in all until stopped, each transaction one or
   * (a `pairShare` of them) two events of a key picked at random among `keys`.
   */
  startKeyedStream(
    producers: number,
    perSecond: number,
    keys: number,
    pairShare: number,
    flakyShare: number,
  ): void {
    this.begin(producers, (1000 * producers) / perSecond, (producer) => {
      const key = `k${String(Math.floor(Math.random() * keys)).padStart(2, '0')}`;
      const count = Math.random() < pairShare ? 2 : 1;
      return this.emitKeyed(producer, { key, count, kind: 'ordered' }, flakyShare);
    });
  }

  /** `transactions` one after another, as loop `producer`. */
  async emitKeyedTransactions(
    producer: number,
    transactions: KeyedTransaction[],
  ): Promise<EmitReport> {
    const report: EmitReport = { committed: 0, failed: 0, ids: [] };
    for (const transaction of transactions) {
      try {
        report.ids.push(...(await this.emitKeyed(producer, transaction, 0)));
        report.committed += transaction.count;
      } catch {
        report.failed += transaction.count;
      }
    }
    return report;
  }

  async stopStream(): Promise<StreamReport> {
    const stream = this.stream;
    this.stream = undefined;
    if (!stream) return { committed: 0, failedBatches: 0 };
    stream.stop = true;
    return stream.done;
  }

  /**
   * Runs `loops` emitting loops, each one transaction per `periodMs`, until stopped; with
   * `keepIds`, the report lists the ids of what committed.
   */
  private begin(
    loops: number,
    periodMs: number,
    emitOne: (loop: number) => Promise<string[]>,
    keepIds = false,
  ): void {
    if (this.stream) return;
    const state = { stop: false, done: Promise.resolve({ committed: 0, failedBatches: 0 }) };
    const loop = async (index: number): Promise<StreamReport> => {
      const report: StreamReport = {
        committed: 0,
        failedBatches: 0,
        ids: keepIds ? [] : undefined,
      };
      let next = Date.now();
      while (!state.stop) {
        try {
          const ids = await emitOne(index);
          report.committed += ids.length;
          report.ids?.push(...ids);
        } catch {
          report.failedBatches++;
          await sleep(100);
        }
        next += periodMs;
        // After an outage, carry on at the same rate rather than catching up in a burst.
        next = Math.max(next, Date.now() - periodMs);
        await sleep(Math.max(0, next - Date.now()));
      }
      return report;
    };
    state.done = Promise.all(Array.from({ length: loops }, (_, index) => loop(index))).then(
      (reports) => ({
        committed: reports.reduce((sum, r) => sum + r.committed, 0),
        failedBatches: reports.reduce((sum, r) => sum + r.failedBatches, 0),
        ids: keepIds ? reports.flatMap((r) => r.ids ?? []) : undefined,
      }),
    );
    this.stream = state;
  }

  private emitBatch(size: number, kind: EventKind, slowMs?: number): Promise<string[]> {
    const payload: FaultPayload =
      kind === 'poison' ? { failHandler: 'fault-b' } : kind === 'slow' ? { slowMs } : {};
    return this.write(
      kind,
      Array.from({ length: size }, (_, index) => ({
        type:
          kind === 'tx' ? FAULT_TX_EVENT : kind === 'limited' ? FAULT_LIMITED_EVENT : FAULT_EVENT,
        aggregateType: 'fault',
        aggregateId: `${kind}-${index}`,
        payload,
      })),
    );
  }

  /** One transaction of keyed events, each with the loop's next `seq`. */
  private emitKeyed(
    producer: number,
    { key, count, kind }: KeyedTransaction,
    flakyShare: number,
  ): Promise<string[]> {
    const first = this.seqs.get(producer) ?? 0;
    // Taken whether or not the transaction commits: a loop's seqs only ever grow.
    this.seqs.set(producer, first + count);
    const flaky = flakyShare > 0 ? { handler: HANDLER_LEDGER, share: flakyShare } : undefined;
    const failHandler = kind === 'ordered-poison' ? HANDLER_LEDGER : undefined;
    return this.write(
      kind,
      Array.from({ length: count }, (_, index) => ({
        type: FAULT_ORDERED_EVENT,
        aggregateType: KEY_AGGREGATE,
        aggregateId: key,
        payload: { producer, seq: first + index, flaky, failHandler },
      })),
    );
  }

  /** The events and their `fault_emitted` rows, in one transaction. */
  private write(kind: EventKind, events: NewOutboxEvent<FaultPayload>[]): Promise<string[]> {
    return this.dataSource.transaction(async (manager: EntityManager) => {
      const ids = await this.publisher.emit(events, { manager });
      await manager.query(
        'INSERT INTO fault_emitted (event_id, kind) SELECT unnest($1::uuid[]), $2',
        [ids, kind],
      );
      return ids;
    });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
