import type { DeadLetterGroup } from '../../store/admin/dead-letter.types';
import type {
  MinuteCount,
  OutboxInstanceInfo,
  OutboxStatus,
  PartitionBacklogTop,
  HandlerLimitState,
} from '../../store/admin/status.types';
import { formatDuration } from '../../common/format-duration.util';
import { actions, goOn } from './actions.view';
import type { ChangeNotice } from './change-notice';
import { html, type Html } from './html.util';
import { instanceTable } from './instances.view';
import { partitionTables } from './partitions.view';
import { limitTable } from './limits.view';
import { query } from './query.util';
import { table, time, type Column } from './table.view';
import { sparkline } from './throughput.view';

/**
 * The overview: counts, throughput, instances, dead-letter groups, the backlog by type, the
 * partitions with the most due events, and the handlers' limits.
 */
export function overview(input: {
  base: string;
  status: OutboxStatus;
  throughput: readonly MinuteCount[];
  groups: readonly DeadLetterGroup[];
  instances: readonly OutboxInstanceInfo[];
  partitions: PartitionBacklogTop;
  limits: readonly HandlerLimitState[];
  notice: ChangeNotice | undefined;
}): Html {
  const { base, status, throughput, groups, instances, partitions, limits, notice } = input;
  const card = (label: string, value: string | number, extra = '') =>
    html`<div class="card ${extra}" data-testid="count-${label}"><b>${value}</b>${label}</div>`;
  return html` ${
      notice
        ? html`<p class="notice" role="status">
            ${notice.text} ${notice.goOn ? goOn(base, notice.goOn.action, notice.goOn.target) : ''}
          </p>`
        : ''
    }
    <div class="cards">
      ${card('due', status.due)}${card('retrying', status.retrying)}${card('in flight', status.inFlight)}
      ${card('expired leases', status.expiredLeases)}${card('parked', status.parked)}${card('dead', status.dead, status.dead > 0 ? 'dead' : '')}
      ${card('discarded', status.discarded)}${card('lag', formatDuration(status.lagMs, '–'))}
      ${card('horizon held', formatDuration(status.horizon.heldMs, '–'))}${card('dead tuples', status.horizon.deadTuples)}
    </div>
    <h2>Throughput</h2>
    ${sparkline(throughput)}
    <h2>Instances</h2>
    ${instanceTable(instances)}
    <h2>Dead letters by type, handler and error</h2>
    ${
      groups.length === 0
        ? html`<p data-testid="no-dead-letters">No dead letters.</p>`
        : table(groupColumns(base), groups, { testId: 'groups' })
    }
    <h2>Undelivered by type</h2>
    ${table(BACKLOG_COLUMNS, status.byType)}
    <h2>Due by partition</h2>
    ${partitionTables(partitions)}
    <h2>Held by limit</h2>
    ${limitTable(limits)}`;
}

/** Dead letters by group, each linked to its list and with its replay and discard. */
function groupColumns(base: string): Column<DeadLetterGroup>[] {
  const target = (g: DeadLetterGroup) => ({
    type: g.type,
    handler: g.handler ?? undefined,
    fingerprint: g.fingerprint,
  });
  return [
    { header: 'count', cell: (g) => g.count, numeric: true },
    { header: 'type', cell: (g) => g.type },
    { header: 'handler', cell: (g) => g.handler ?? '–' },
    {
      header: 'error',
      cell: (g) =>
        html`<a href="${base}/dead?${query(target(g))}">${g.sampleError ?? '(no message)'}</a>`,
    },
    { header: 'last seen', cell: (g) => time(g.lastSeenAt) },
    { header: '', cell: (g) => actions(base, target(g)) },
  ];
}

const BACKLOG_COLUMNS: readonly Column<OutboxStatus['byType'][number]>[] = [
  { header: 'type', cell: (t) => t.type },
  { header: 'due', cell: (t) => t.due, numeric: true },
  { header: 'retrying', cell: (t) => t.retrying, numeric: true },
  { header: 'in flight', cell: (t) => t.inFlight, numeric: true },
  { header: 'dead', cell: (t) => t.dead, numeric: true },
  { header: 'discarded', cell: (t) => t.discarded, numeric: true },
  { header: 'lag', cell: (t) => formatDuration(t.oldestDueWaitMs, '–'), numeric: true },
];
