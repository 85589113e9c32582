import type { PartitionBacklog, PartitionBacklogTop } from '../../store/admin/status.types';
import { formatDuration } from '../../common/format-duration.util';
import { html, type Html } from './html.util';
import { table, type Column } from './table.view';

const COLUMNS: readonly Column<PartitionBacklog>[] = [
  // '' is the partition of the events with neither a partition key nor an organization.
  { header: 'partition', cell: (p) => (p.partition === '' ? html`<i>none</i>` : p.partition) },
  { header: 'due', cell: (p) => `${p.due}${p.dueAtLeast ? '+' : ''}`, numeric: true },
  { header: 'oldest due', cell: (p) => formatDuration(p.oldestDueWaitMs, '–'), numeric: true },
];

/** Who floods: the partitions with the most due first tries, and those waiting longest. */
export function partitionTables(top: PartitionBacklogTop): Html {
  if (top.partitions === 0) {
    return html`<p class="muted" data-testid="no-partitions">No partition has a due event.</p>`;
  }
  return html`<p class="muted">
      ${top.partitions} partition${top.partitions === 1 ? '' : 's'} with due first
      tries${top.complete ? '' : ' among the first 1,000 read'}; retries are counted by type above.
    </p>
    <h3>Most due</h3>
    ${table(COLUMNS, top.byDue, { testId: 'partitions-by-due' })}
    <h3>Oldest due</h3>
    ${table(COLUMNS, top.byOldest, { testId: 'partitions-by-oldest' })}`;
}
