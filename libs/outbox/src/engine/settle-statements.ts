import type {
  DeliveredSettle,
  FailedSettle,
  LimitedSettle,
  OrderedSettleOptions,
  OutboxRecord,
  SettleOutcome,
} from '../store/lease/lease.types';
import type { OutboxLeaseStore } from '../store/lease/lease.store';
import type { OutboxResult } from '../store/outbox.result';
import type { ResolvedOutboxOptions } from '../outbox.options';

/** What one settle came to. */
export type SettleResult =
  /** Written: delivered, or scheduled again after a failure. */
  | 'settled'
  /** Written, and the event ran out of attempts with it (announced once). */
  | 'dead'
  /** Given back unstarted (shutdown). */
  | 'released'
  /** Nothing written: a newer claim holds the event (its lease had ended). */
  | 'stale'
  /** Never written: the store kept failing until the lease was too close to its end. */
  | 'lost';

export type Settle =
  | { kind: 'delivered'; record: OutboxRecord; settle: DeliveredSettle }
  | { kind: 'failed'; record: OutboxRecord; settle: FailedSettle }
  | { kind: 'release'; record: OutboxRecord; settle: { id: string; attempts: number } }
  // Every handler left is ordered and held by an earlier event of the key: parked.
  | { kind: 'held'; record: OutboxRecord; settle: DeliveredSettle }
  // A limited handler's limit had no room: due again when it has, the attempt given back.
  | { kind: 'limited'; record: OutboxRecord; settle: LimitedSettle };

export interface CompleterOptions {
  deadRetryMs: number;
  deadRetryByType?: Readonly<Record<string, number>>;
  /** Rows per settle statement. */
  batchSize: number;
  /** Read at each settle: set once the app has ordered handlers (see `orderedDone`). */
  orderedSettles?: () => OrderedSettleOptions | undefined;
}

const NO_SKIP: OrderedSettleOptions = { skipDead: [] };

/** The completer's options from the module's; 0 there means no automatic replay. */
export function completerOptions(
  options: Pick<ResolvedOutboxOptions, 'deadRetryMs' | 'deadRetryByType' | 'tuning'>,
  orderedSettles: CompleterOptions['orderedSettles'],
): CompleterOptions {
  const { deadRetryMs, deadRetryByType, tuning } = options;
  return {
    deadRetryMs: deadRetryMs || Infinity,
    deadRetryByType:
      deadRetryByType &&
      Object.fromEntries(
        Object.entries(deadRetryByType).map(([type, ms]) => [type, ms || Infinity]),
      ),
    batchSize: tuning.batchSize,
    orderedSettles,
  };
}

/** The one statement that writes `items`, settles of one kind, through the repository. */
export function writeSettles(
  repository: OutboxLeaseStore,
  options: CompleterOptions,
  kind: Settle['kind'],
  items: readonly Settle[],
): Promise<OutboxResult<SettleOutcome>> {
  // An event placed for ordered handlers tells its key when settled, whatever this app orders:
  // an instance that orders nothing must still wake the next event of the key.
  const ordering =
    options.orderedSettles?.() ?? (items.some((i) => i.record.sequenced) ? NO_SKIP : undefined);
  if (kind === 'delivered' || kind === 'held') {
    const settles = items.map((i) => (i as Extract<Settle, { kind: 'delivered' | 'held' }>).settle);
    return kind === 'held'
      ? repository.park(settles, ordering ?? NO_SKIP)
      : repository.markDelivered(settles, ordering);
  }
  if (kind === 'limited') {
    const settles = items.map((i) => (i as Extract<Settle, { kind: 'limited' }>).settle);
    return repository.markLimited(settles, ordering);
  }
  if (kind === 'failed') {
    return repository.markFailed(
      items.map((i) => (i as Extract<Settle, { kind: 'failed' }>).settle),
      { deadRetryMs: options.deadRetryMs, deadRetryByType: options.deadRetryByType, ordering },
    );
  }
  return repository.release(items.map((i) => i.settle));
}
