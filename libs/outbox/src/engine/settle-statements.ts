import type { OrderedSettleOptions, SettleOutcome } from '../store/lease/lease.types';
import type { OutboxRepository } from '../store/lease/outbox.repository';
import type { OutboxResult } from '../store/outbox.result';
import type { CompleterOptions, Settle } from './outbox.completer';

const NO_SKIP: OrderedSettleOptions = { skipDead: [] };

/** The one statement that writes `items`, settles of one kind, through the repository. */
export function writeSettles(
  repository: OutboxRepository,
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
  if (kind === 'failed') {
    return repository.markFailed(
      items.map((i) => (i as Extract<Settle, { kind: 'failed' }>).settle),
      { deadRetryMs: options.deadRetryMs, deadRetryByType: options.deadRetryByType, ordering },
    );
  }
  return repository.release(items.map((i) => i.settle));
}
