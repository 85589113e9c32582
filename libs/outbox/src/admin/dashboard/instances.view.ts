import type { OutboxInstanceInfo } from '../../store/admin/status.types';
import { html, type Html } from './html.util';
import { table, time, type Column } from './table.view';

const COLUMNS: readonly Column<OutboxInstanceInfo>[] = [
  { header: 'host', cell: (d) => d.host },
  { header: 'pid', cell: (d) => d.pid, numeric: true },
  {
    header: 'state',
    cell: (d) => (d.reporting ? d.state : html`<b>silent</b> (last: ${d.state})`),
  },
  { header: 'listener', cell: (d) => d.listener },
  // Events a relay awaits confirms for count too, so in flight may exceed the slots.
  { header: 'in flight', cell: (d) => `${d.inFlight} (${d.concurrency} slots)`, numeric: true },
  { header: 'types', cell: (d) => (d.types ? d.types.join(', ') : 'all') },
  { header: 'started', cell: (d) => time(d.startedAt) },
  { header: 'last claim', cell: (d) => time(d.lastClaimAt) },
  { header: 'last report', cell: (d) => time(d.seenAt) },
];

/** Every instance that reports in; one that stopped reporting is muted and marked silent. */
export function instanceTable(instances: readonly OutboxInstanceInfo[]): Html {
  if (instances.length === 0) {
    return html`<p class="muted" data-testid="no-instances">No instance reports in.</p>`;
  }
  return table(COLUMNS, instances, {
    testId: 'instances',
    rowClass: (d) => (d.reporting ? '' : 'muted'),
  });
}
