import { isUuid } from '../../common/uuid.util';

/** The last row of a page: its sort time (microseconds, UTC, as text), id and a tie-break. */
export interface Keyset {
  at: string;
  id: string;
  /** Orders rows of one id (a blocked key's handler). */
  tie?: string;
}

/** A page asked for: its size, and the last row of the page before it (null: the first page). */
export interface KeysetPage {
  limit: number;
  after: Keyset | null;
}

/** The select-list expression of a keyset time: `column` with microseconds, in UTC. */
export function keysetTime(column: string): string {
  return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
}

/**
 * A page's `next` cursor, opaque to callers. Tagged with the listing it belongs to, so that a
 * cursor of one listing is refused by another.
 */
export function encodeCursor(kind: string, keyset: Keyset): string {
  const fields = [kind, keyset.at, keyset.id, ...(keyset.tie === undefined ? [] : [keyset.tie])];
  return Buffer.from(JSON.stringify(fields)).toString('base64url');
}

/** The keyset of a cursor `encodeCursor(kind, …)` made, or null for anything else. */
export function decodeCursor(kind: string, cursor: string): Keyset | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(parsed) &&
      (parsed.length === 3 || (parsed.length === 4 && typeof parsed[3] === 'string')) &&
      parsed[0] === kind &&
      typeof parsed[1] === 'string' &&
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(parsed[1]) &&
      isUuid(parsed[2])
    ) {
      return parsed.length === 4
        ? { at: parsed[1], id: parsed[2], tie: parsed[3] as string }
        : { at: parsed[1], id: parsed[2] };
    }
  } catch {
    // Not base64url JSON: reported like any other foreign cursor.
  }
  return null;
}

/**
 * The `cursor` of a replay or discard by filter: the last event id it looked at (they walk by
 * id), tagged so that a page cursor is refused in its place.
 */
export function encodeIdCursor(kind: string, id: string): string {
  return Buffer.from(JSON.stringify([kind, id])).toString('base64url');
}

/** The id of a cursor `encodeIdCursor(kind, …)` made, or null for anything else. */
export function decodeIdCursor(kind: string, cursor: string): string | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(parsed) && parsed.length === 2 && parsed[0] === kind && isUuid(parsed[1])) {
      return String(parsed[1]).toLowerCase();
    }
  } catch {
    // Not base64url JSON: reported like any other foreign cursor.
  }
  return null;
}
