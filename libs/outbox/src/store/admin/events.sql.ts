import type { OutboxEventList, OutboxEventsFilter } from './event.types';
import { encodeCursor, keysetTime, type KeysetPage } from './keyset-cursor.util';
import { EVENT_DETAIL_COLUMNS, toEventDetail, type DetailRow } from './event-detail.sql';

/**
 * $2 organization, $3 aggregate type, $4 aggregate id, $5 ids: each applies when given; $6/$7 the
 * keyset (the previous page's last occurrence time, as `event_key` gives it with microseconds,
 * and id).
 */
const EVENT_CONDITIONS = `
      ($2::text IS NULL OR organization_id = $2::text)
  AND ($3::text IS NULL OR aggregate_type = $3::text)
  AND ($4::text IS NULL OR aggregate_id = $4::text)
  AND ($5::uuid[] IS NULL OR id = ANY ($5::uuid[]))
  AND ($6::timestamptz IS NULL OR (occurred_at, id) < ($6::timestamptz, $7::uuid))`;

const EVENT_PAGE_COLUMNS = `${EVENT_DETAIL_COLUMNS},
  ${keysetTime('occurred_at')} AS event_key`;

/**
 * A page of events whatever their state, newest first by occurrence time and id, at most $8
 * rows, of the types in $1 (every type when null). `perType` (for a filter with types and an
 * organization) reads one page per type backwards along `outbox_event_organization_type_idx`
 * (organization_id, type, occurred_at, id) and merges them: before PostgreSQL 17 an index scan
 * with `type = ANY (…)` does not return rows in the index's order, so the plain statement would
 * read and sort every event of the organization and types. Otherwise one scan and a sort: by
 * primary key with ids, else the organization's range of that index or the whole table, as the
 * planner judges cheaper. Parameters: see `eventsParameters`.
 */
export function listEventsStatement(perType: boolean): string {
  if (!perType) {
    return `
  SELECT ${EVENT_PAGE_COLUMNS}
  FROM outbox_event
  WHERE ($1::text[] IS NULL OR type = ANY ($1::text[]))
    AND ${EVENT_CONDITIONS}
  ORDER BY occurred_at DESC, id DESC
  LIMIT $8
`;
  }
  return `
  SELECT e.*
  FROM unnest($1::text[]) AS t(wanted)
  CROSS JOIN LATERAL (
    SELECT ${EVENT_PAGE_COLUMNS}
    FROM outbox_event
    WHERE type = t.wanted
      AND ${EVENT_CONDITIONS}
    ORDER BY occurred_at DESC, id DESC
    LIMIT $8) AS e
  ORDER BY e.occurred_at DESC, e.id DESC
  LIMIT $8
`;
}

/** Whether `listEventsStatement` reads one page per type: with types and an organization. */
export function readsPerType(filter: OutboxEventsFilter): boolean {
  return filter.types !== undefined && filter.organizationId !== undefined;
}

/**
 * $1 types (each once) or null, $2–$5 the other conditions, $6/$7 the keyset, $8 the page size
 * (one more than asked: whether a next page exists).
 */
export function eventsParameters(filter: OutboxEventsFilter, page: KeysetPage): unknown[] {
  return [
    filter.types ? [...new Set(filter.types)] : null,
    filter.organizationId ?? null,
    filter.aggregateType ?? null,
    filter.aggregateId ?? null,
    filter.ids ? filter.ids.map((id) => id.toLowerCase()) : null,
    page.after?.at ?? null,
    page.after?.id ?? null,
    page.limit + 1,
  ];
}

/** Tags `events` cursors (see `encodeCursor`). */
export const EVENTS_CURSOR = 'events';

interface EventPageRow extends DetailRow {
  event_key: string;
}

/** A page of rows (one more than `limit` when a next page exists) as a list with its cursor. */
export function toEventList(limit: number) {
  return (rows: EventPageRow[]): OutboxEventList => {
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map((row) => toEventDetail(row)),
      next:
        rows.length > limit && last
          ? encodeCursor(EVENTS_CURSOR, { at: last.event_key, id: last.id })
          : null,
    };
  };
}
