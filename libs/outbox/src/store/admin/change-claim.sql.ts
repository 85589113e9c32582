/**
 * The claim of a change by filter in `outbox_admin_change`: one row per scope, so one change by
 * filter at a time. Every change by filter uses the same scope: any two filters may select the
 * same events (a type and a handler, an error text and a group), so any two are taken to overlap.
 */
export const CHANGE_SCOPE = 'dead-letters';

/**
 * Takes the scope $1 for change $2 ($3 its kind, $4 the actor or null, $5 jsonb of the
 * selection) until $6 ms from now, unless a claim that has not expired holds it (a process that
 * died mid-change leaves one that expires). Answers one row: `claimed` true, or false with the
 * holder's claim. A holder that commits while this runs is not seen by its snapshot: no row then,
 * still refused.
 */
export const CLAIM_CHANGE = `
  WITH claimed AS (
    INSERT INTO outbox_admin_change AS c
      (scope, change_id, kind, actor, selection, started_at, expires_at)
    VALUES ($1::text, $2::uuid, $3::text, $4::text, $5::jsonb, now(),
            now() + $6::float8 * interval '1 millisecond')
    ON CONFLICT (scope) DO UPDATE
      SET change_id = excluded.change_id, kind = excluded.kind, actor = excluded.actor,
          selection = excluded.selection, started_at = excluded.started_at,
          expires_at = excluded.expires_at
      WHERE c.expires_at <= now()
    RETURNING change_id
  )
  SELECT true AS claimed, NULL::uuid AS change_id, NULL::text AS kind, NULL::text AS actor,
         NULL::timestamptz AS started_at, NULL::timestamptz AS expires_at
  FROM claimed
  UNION ALL
  SELECT false, change_id, kind, actor, started_at, expires_at
  FROM outbox_admin_change
  WHERE scope = $1::text AND NOT EXISTS (SELECT 1 FROM claimed)
`;

/** Ends change $1's claim; a claim that expired and was taken by another change stays. */
export const RELEASE_CHANGE = `DELETE FROM outbox_admin_change WHERE change_id = $1::uuid`;

/** A change by filter that holds the scope. */
export interface RunningChange {
  changeId: string;
  kind: string;
  actor: string | null;
  startedAt: Date;
  expiresAt: Date;
}

interface ClaimRow {
  claimed: boolean;
  change_id: string | null;
  kind: string | null;
  actor: string | null;
  started_at: Date | null;
  expires_at: Date | null;
}

/** Claimed, or refused with the change that holds the scope (null: it was not seen yet). */
export type ChangeClaim = { claimed: true } | { claimed: false; holder: RunningChange | null };

export function toClaim(rows: ClaimRow[]): ChangeClaim {
  const [row] = rows;
  if (row?.claimed) return { claimed: true };
  if (!row?.change_id || !row.kind || !row.started_at || !row.expires_at) {
    return { claimed: false, holder: null };
  }
  return {
    claimed: false,
    holder: {
      changeId: row.change_id,
      kind: row.kind,
      actor: row.actor,
      startedAt: row.started_at,
      expiresAt: row.expires_at,
    },
  };
}
