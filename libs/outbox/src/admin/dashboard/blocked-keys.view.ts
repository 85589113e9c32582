import type { BlockedKey, BlockedKeyList } from '../../store/admin/dead-letter.types';
import { actions } from './actions.view';
import { html, type Html } from './html.util';
import { query } from './query.util';
import { table, time, type Column } from './table.view';

/** What the blocked-keys page narrows to. */
export interface BlockedKeysTarget {
  handler?: string;
  key?: string;
}

/**
 * One page of the keys ordered handlers are blocked on, each with its dead head's replay (the
 * key goes on once the head is delivered) and discard (it goes on at once).
 */
export function blockedKeysList(
  base: string,
  target: BlockedKeysTarget,
  list: BlockedKeyList,
): Html {
  const narrowed = [
    target.handler && `handler ${target.handler}`,
    target.key && `key ${target.key}`,
  ]
    .filter(Boolean)
    .join(', ');
  return html`<p class="muted">
      ${narrowed || 'every ordered handler and key'}: the head of each key is dead for the handler,
      which runs none of the events behind it until the head is replayed and delivered, or
      discarded.
    </p>
    ${
      list.items.length === 0
        ? html`<p data-testid="no-blocked-keys">No blocked keys.</p>`
        : table(columns(base), list.items, { testId: 'blocked-keys' })
    }
    ${list.next ? html`<p><a href="${base}/blocked?${query({ ...target, after: list.next })}">Next page</a></p>` : ''}`;
}

function columns(base: string): Column<BlockedKey>[] {
  return [
    { header: 'handler', cell: (item) => item.handler },
    { header: 'key', cell: (item) => item.key },
    {
      header: 'head event',
      cell: (item) =>
        html`<a href="${base}/events/${item.eventId}"><code>${item.eventId}</code></a>`,
    },
    { header: 'dead since', cell: (item) => time(item.since) },
    { header: 'waiting', cell: (item) => item.waiting, numeric: true },
    { header: 'last error', cell: (item) => item.lastError ?? '–' },
    { header: '', cell: (item) => actions(base, { id: item.eventId }) },
  ];
}
