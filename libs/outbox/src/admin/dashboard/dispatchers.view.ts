import type { DispatcherInfo } from '../../store/admin/status.types';
import { html, type Html } from './html.util';
import { table, time, type Column } from './table.view';

const COLUMNS: readonly Column<DispatcherInfo>[] = [
  { header: 'host', cell: (d) => d.host },
  { header: 'pid', cell: (d) => d.pid, numeric: true },
  {
    header: 'state',
    cell: (d) => (d.reporting ? d.state : html`<b>silent</b> (last: ${d.state})`),
  },
  { header: 'listener', cell: (d) => d.listener },
  { header: 'in flight', cell: (d) => `${d.inFlight} / ${d.concurrency}`, numeric: true },
  { header: 'types', cell: (d) => (d.types ? d.types.join(', ') : 'all') },
  { header: 'started', cell: (d) => time(d.startedAt) },
  { header: 'last claim', cell: (d) => time(d.lastClaimAt) },
  { header: 'last report', cell: (d) => time(d.seenAt) },
];

/** Every dispatcher that reports in; one that stopped reporting is muted and marked silent. */
export function dispatcherTable(dispatchers: readonly DispatcherInfo[]): Html {
  if (dispatchers.length === 0) {
    return html`<p class="muted" data-testid="no-dispatchers">No dispatcher reports in.</p>`;
  }
  return table(COLUMNS, dispatchers, {
    testId: 'dispatchers',
    rowClass: (d) => (d.reporting ? '' : 'muted'),
  });
}
