import type { DataSource } from 'typeorm';
import type { OutboxPublisher } from '@app/outbox';
import { FAULT_EVENT, FAULT_TX_EVENT, type FaultPayload } from './fault-handlers';
import type { EmitReport, EventKind, StreamReport } from './ipc';

/**
 * Emits `fault.work` events the way an application does: through OutboxPublisher inside a
 * transaction that also writes a business row (`fault_emitted`). That row is the suite's record
 * of what was produced: it exists exactly when the transaction committed, whatever the client
 * saw, so a commit whose acknowledgement was lost in a fault still counts.
 */
export class Producer {
  private stream: { stop: boolean; done: Promise<StreamReport> } | undefined;

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

  /** Emits `batch` events per transaction at about `perSecond` until stopped; failures are retried by the next batch. */
  startStream(perSecond: number, batch: number, kind: EventKind = 'work'): void {
    if (this.stream) return;
    const state = { stop: false, done: Promise.resolve({ committed: 0, failedBatches: 0 }) };
    const periodMs = (1000 * batch) / perSecond;
    state.done = (async () => {
      const report: StreamReport = { committed: 0, failedBatches: 0 };
      let next = Date.now();
      while (!state.stop) {
        try {
          await this.emitBatch(batch, kind);
          report.committed += batch;
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
    })();
    this.stream = state;
  }

  async stopStream(): Promise<StreamReport> {
    const stream = this.stream;
    this.stream = undefined;
    if (!stream) return { committed: 0, failedBatches: 0 };
    stream.stop = true;
    return stream.done;
  }

  private emitBatch(size: number, kind: EventKind, slowMs?: number): Promise<string[]> {
    const payload: FaultPayload =
      kind === 'poison' ? { failHandler: 'fault-b' } : kind === 'slow' ? { slowMs } : {};
    return this.dataSource.transaction(async (manager) => {
      const ids = await this.publisher.emit(
        Array.from({ length: size }, (_, index) => ({
          type: kind === 'tx' ? FAULT_TX_EVENT : FAULT_EVENT,
          aggregateType: 'fault',
          aggregateId: `${kind}-${index}`,
          payload,
        })),
        { manager },
      );
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
