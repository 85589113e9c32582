import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { OutboxLeaseStore } from '../../libs/outbox/src';

/** What the repository's claim is asked for: 100 rows, a 60 s lease, dead rows back after 6 h. */
export const CLAIM_OPTIONS = { limit: 100, leaseMs: 60_000, deadRetryMs: 21_600_000 };

/** CLAIM's parameters before the rewrite: $1 limit, $2 lease ms, $3 dead retry ms, $4 types. */
const FALLBACK_VALUES = [100, 60_000, 21_600_000, null];

export interface CapturedClaim {
  /** The statement as sent: CLAIM with its placeholders, or with the values written in. */
  text: string;
  values: unknown[];
  /** How it was found: bound parameters, values inlined in the text, or neither (fallback). */
  how: 'bound' | 'inlined' | 'fallback';
  /** The values the library gave each `$n`, for the log. */
  shown: string;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A pattern of `statement` with each `$n` standing for whatever was written in its place. */
function inlinedPattern(statement: string): RegExp {
  const seen = new Set<string>();
  let pattern = '';
  let last = 0;
  for (const match of statement.matchAll(/\$(\d+)/g)) {
    pattern += escapeRegExp(statement.slice(last, match.index));
    const n = match[1];
    pattern += seen.has(n) ? `\\k<p${n}>` : `(?<p${n}>.*?)`;
    seen.add(n);
    last = match.index + match[0].length;
  }
  return new RegExp(pattern + escapeRegExp(statement.slice(last)), 's');
}

/**
 * The claim statement exactly as the library sends it for CLAIM_OPTIONS: the repository's claim
 * runs once on a DataSource whose connections refuse the statement that holds CLAIM and keep
 * it, so nothing is claimed. A statement with bound parameters comes back as CLAIM and its
 * values; one with the values written into the text (a runner that inlines them) comes back as
 * that text. When the claim never reaches the database, CLAIM with the pre-rewrite parameters.
 */
export async function captureClaim(url: string, claim: string): Promise<CapturedClaim> {
  const dataSource = new DataSource({
    type: 'postgres',
    url,
    connectTimeoutMS: 5000,
    extra: { application_name: 'bench-claim-capture' },
  });
  await dataSource.initialize();
  const inlined = inlinedPattern(claim);
  let captured: CapturedClaim | undefined;
  try {
    const pool = (dataSource.driver as unknown as { master: Pool }).master;
    const wrapped = new WeakSet<object>();
    pool.on('acquire', (client) => {
      if (wrapped.has(client)) return;
      wrapped.add(client);
      const target = client as unknown as { query: (...args: unknown[]) => Promise<unknown> };
      const query = target.query.bind(client);
      target.query = (...args: unknown[]) => {
        const [first, second] = args;
        const config =
          typeof first === 'object' && first !== null
            ? (first as { text?: unknown; values?: unknown })
            : undefined;
        const text = config ? config.text : first;
        const values = ((config ? config.values : second) ?? []) as unknown[];
        if (text === claim) {
          captured = { text: claim, values, how: 'bound', shown: JSON.stringify(values) };
        } else if (typeof text === 'string') {
          const match = inlined.exec(text);
          if (match) {
            const groups = Object.entries(match.groups ?? {})
              .sort(([a], [b]) => Number(a.slice(1)) - Number(b.slice(1)))
              .map(([name, value]) => `$${name.slice(1)}=${value}`);
            captured = { text: match[0], values: [], how: 'inlined', shown: groups.join(', ') };
          }
        }
        if (captured) return Promise.reject(new Error('claim kept by the bench, not run'));
        return query(...args);
      };
    });
    const repository = new OutboxLeaseStore(dataSource) as unknown as {
      claim?: (options: typeof CLAIM_OPTIONS) => Promise<unknown>;
    };
    await repository.claim?.(CLAIM_OPTIONS);
  } catch {
    // Whatever the claim did after it was refused, only what it sent matters.
  } finally {
    await dataSource.destroy();
  }
  return (
    captured ?? {
      text: claim,
      values: FALLBACK_VALUES,
      how: 'fallback',
      shown: JSON.stringify(FALLBACK_VALUES),
    }
  );
}
