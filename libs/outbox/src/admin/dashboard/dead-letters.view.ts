import type { DeadLetter, DeadLetterList } from '../../store/admin/dead-letter.types';
import { actions, describe, type ActionTarget } from './actions.view';
import { html, type Html } from './html.util';
import { query } from './query.util';
import { table, time, type Column } from './table.view';

/** One page of the dead letters a target selects, each with its replay and discard. */
export function deadList(base: string, target: ActionTarget, list: DeadLetterList): Html {
  return html` <p class="muted">${describe(target)}</p>
    ${
      list.items.length === 0
        ? html`<p>No dead letters.</p>`
        : table(columns(base), list.items, { testId: 'dead-letters' })
    }
    ${list.next ? html`<p><a href="${base}/dead?${query({ ...target, after: list.next })}">Next page</a></p>` : ''}`;
}

function columns(base: string): Column<DeadLetter>[] {
  return [
    {
      header: 'id',
      cell: (item) => html`<a href="${base}/events/${item.id}"><code>${item.id}</code></a>`,
    },
    { header: 'type', cell: (item) => item.type },
    { header: 'state', cell: (item) => item.state },
    { header: 'attempts', cell: (item) => item.attempts, numeric: true },
    { header: 'failed', cell: (item) => item.failedHandlers.map((h) => h.name).join(', ') || '–' },
    { header: 'last error', cell: (item) => item.lastError ?? '–' },
    { header: 'dead at', cell: (item) => time(item.deadAt) },
    {
      header: '',
      cell: (item) => (item.state === 'dead' ? actions(base, { id: item.id }) : ''),
    },
  ];
}
