import type {
  BlockedKey,
  BlockedKeyList,
  DeadLetter,
  DeadLetterChange,
  DeadLetterGroup,
  DeadLetterList,
} from '../../store/admin/dead-letter.types';
import type {
  OutboxStatus,
  PartitionBacklog,
  PartitionBacklogTop,
} from '../../store/admin/status.types';
import { formatDuration } from '../../common/format-duration.util';

/** Text for people; `--json` prints the objects themselves instead. */

/** Rows under a header, each column as wide as its widest cell; numbers right-aligned. */
function table(header: string[], rows: (string | number)[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells: (string | number)[]) =>
    cells
      .map((cell, i) =>
        typeof cell === 'number' ? String(cell).padStart(widths[i]) : cell.padEnd(widths[i]),
      )
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

const time = (at: Date | null) => (at ? at.toISOString() : '-');

/** Long text cut to one line of `max` characters. */
function cut(text: string | null, max: number): string {
  if (!text) return '-';
  const one = text.replace(/\s+/g, ' ');
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

export function renderStatus(status: OutboxStatus): string {
  const totals =
    `due ${status.due}  retrying ${status.retrying}  in flight ${status.inFlight}  ` +
    `expired leases ${status.expiredLeases}  parked ${status.parked}  dead ${status.dead}  ` +
    `discarded ${status.discarded}\n` +
    `lag ${formatDuration(status.lagMs)}  next due ${status.nextDueInMs === 0 ? 'now' : formatDuration(status.nextDueInMs)}\n`;
  if (status.byType.length === 0) return totals + 'no undelivered events\n';
  return (
    totals +
    '\n' +
    table(
      ['type', 'due', 'retrying', 'in flight', 'dead', 'discarded', 'lag'],
      status.byType.map((t) => [
        t.type,
        t.due,
        t.retrying,
        t.inFlight,
        t.dead,
        t.discarded,
        formatDuration(t.oldestDueWaitMs),
      ]),
    )
  );
}

export function renderList(list: DeadLetterList): string {
  if (list.items.length === 0) return 'no dead letters\n';
  const rows = list.items.map((item: DeadLetter) => [
    item.id,
    item.type,
    item.state,
    item.attempts,
    time(item.deadAt),
    item.failedHandlers.map((h) => h.name).join(',') || '-',
    cut(item.lastError, 60),
  ]);
  const next = list.next ? `\nmore: --after ${list.next}\n` : '';
  return table(['id', 'type', 'state', 'attempts', 'dead at', 'failed', 'last error'], rows) + next;
}

export function renderGroups(groups: DeadLetterGroup[]): string {
  if (groups.length === 0) return 'no dead letters\n';
  return table(
    ['count', 'type', 'handler', 'first seen', 'last seen', 'error'],
    groups.map((g) => [
      g.count,
      g.type,
      g.handler ?? '-',
      time(g.firstSeenAt),
      time(g.lastSeenAt),
      cut(g.sampleError, 60),
    ]),
  );
}

export function renderPartitions(top: PartitionBacklogTop): string {
  if (top.partitions === 0) return 'no partition has a due event\n';
  const rows = (list: PartitionBacklog[]) =>
    list.map((p) => [
      p.partition === '' ? '(none)' : p.partition,
      `${p.due}${p.dueAtLeast ? '+' : ''}`,
      formatDuration(p.oldestDueWaitMs),
    ]);
  const header = ['partition', 'due', 'oldest due'];
  const of = top.complete ? '' : ' among the first 1,000 read';
  return (
    `${top.partitions} partition(s) with due first tries${of}; retries are counted by status\n` +
    '\nmost due\n' +
    table(header, rows(top.byDue)) +
    '\noldest due\n' +
    table(header, rows(top.byOldest))
  );
}

export function renderBlockedKeys(list: BlockedKeyList): string {
  if (list.items.length === 0) return 'no blocked keys\n';
  const rows = list.items.map((item: BlockedKey) => [
    item.handler,
    item.key,
    item.eventId,
    time(item.since),
    item.waiting,
    cut(item.lastError, 50),
  ]);
  const next = list.next ? `\nmore: --after ${list.next}\n` : '';
  const unblock =
    '\nunblock: dead replay <eventId> (once delivered) or dead discard <eventId> --reason <text>\n';
  return (
    table(['handler', 'key', 'head event', 'dead since', 'waiting', 'last error'], rows) +
    next +
    unblock
  );
}

/** Ids printed by a text change report; `--json` gives them all (a filter's: its sample). */
const SHOWN_IDS = 10;

function idLines(ids: readonly string[], all: number, jsonGives: string): string {
  const shown = ids.slice(0, SHOWN_IDS).map((id) => `  ${id}\n`);
  const more = all > SHOWN_IDS ? [`  … and ${all - SHOWN_IDS} more (${jsonGives})\n`] : [];
  return [...shown, ...more].join('');
}

/** `  type  count` lines, most first. */
function typeLines(counts: Record<string, number>): string {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const width = Math.max(...entries.map(([type]) => type.length));
  return entries.map(([type, n]) => `  ${type.padEnd(width)}  ${n}\n`).join('');
}

const STOPPED: Record<'maxRows' | 'timeBudget', string> = {
  maxRows: 'stopped at --max-rows; more may remain',
  timeBudget: 'stopped when --time-budget-ms ran out; more may remain',
};

export function renderChange(verb: 'replay' | 'discard', change: DeadLetterChange): string {
  const done = verb === 'replay' ? 'replayed' : 'discarded';
  const head = change.dryRun
    ? `would ${verb} ${change.count} event(s) (dry run, nothing changed)\n`
    : `${done} ${change.count} event(s)\n`;
  // An ids change answers every id; a filter's, the first ones (`sampleIds`).
  const every = change.ids.length === change.count;
  const changed =
    change.count > 0
      ? 'by type:\n' +
        typeLines(change.countsByType) +
        (every ? 'ids:\n' : 'first ids:\n') +
        idLines(
          every ? change.ids : change.sampleIds,
          every ? change.count : change.sampleIds.length,
          every ? '--json lists all' : '--json lists them',
        )
      : '';
  const unchanged =
    change.unchanged.length > 0
      ? `not changed (unknown, delivered, not in a state for it, or running): ${change.unchanged.length}\n` +
        idLines(change.unchanged, change.unchanged.length, '--json lists all')
      : '';
  const next =
    change.stoppedBy && change.cursor
      ? `${STOPPED[change.stoppedBy]}: go on with the same command and\n  --after ${change.cursor}\n`
      : '';
  return head + changed + unchanged + next;
}
