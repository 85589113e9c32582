import type { HandlerLimitState } from '../../store/admin/status.types';
import { html, type Html } from './html.util';
import { table, time, type Column } from './table.view';

/** The limit as declared: `3 at once`, `10 per 1000 ms`, or both. */
function declared(limit: HandlerLimitState): string {
  const parts: string[] = [];
  if (limit.maxConcurrent !== null) parts.push(`${limit.maxConcurrent} at once`);
  if (limit.rate) parts.push(`${limit.rate.limit} per ${limit.rate.perMs} ms`);
  return parts.join(', ');
}

const COLUMNS: readonly Column<HandlerLimitState>[] = [
  { header: 'handler', cell: (l) => l.handler },
  // '': one limit across every partition, or the events with no partition of a limit per one.
  { header: 'partition', cell: (l) => (l.partition === '' ? '–' : l.partition) },
  { header: 'limit', cell: declared },
  { header: 'in flight', cell: (l) => l.inFlight, numeric: true },
  { header: 'in window', cell: (l) => l.inWindow, numeric: true },
  { header: 'held by limit', cell: (l) => l.held, numeric: true },
  { header: 'held until', cell: (l) => time(l.heldUntil) },
];

/** Held by limit: each limited handler's limit across processes, busiest first. */
export function limitTable(limits: readonly HandlerLimitState[]): Html {
  if (limits.length === 0) {
    return html`<p class="muted" data-testid="no-limits">No limited handler has run yet.</p>`;
  }
  return table(COLUMNS, limits, { testId: 'limits' });
}
