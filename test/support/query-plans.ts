import type { Client } from 'pg';

/** A node of a plan in EXPLAIN's JSON format, with the fields the tests read. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  'Index Cond'?: string;
  Plans?: PlanNode[];
}

/** A statement run inside a function, as `auto_explain` reported it. */
export interface NestedPlan {
  queryText: string;
  plan: PlanNode;
}

export function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/** Scans of outbox_event in a plan (bitmap index scans name no relation; their heap scan does). */
export function tableScans(plan: PlanNode): PlanNode[] {
  return planNodes(plan).filter(
    (node) => node['Relation Name'] === 'outbox_event' && node['Node Type'].endsWith('Scan'),
  );
}

/**
 * Table rows a scan looked at: those it returned and those it read and threw away. EXPLAIN gives
 * each as a per-loop average.
 */
export function rowsRead(scan: PlanNode): number {
  const perLoop =
    (scan['Actual Rows'] ?? 0) +
    (scan['Rows Removed by Filter'] ?? 0) +
    (scan['Rows Removed by Index Recheck'] ?? 0);
  return Math.round(perLoop * (scan['Actual Loops'] ?? 1));
}

const AUTO_EXPLAIN = [
  `LOAD 'auto_explain'`,
  'SET auto_explain.log_min_duration = 0',
  'SET auto_explain.log_analyze = on',
  'SET auto_explain.log_buffers = on',
  'SET auto_explain.log_nested_statements = on',
  'SET auto_explain.log_format = json',
  // To this client as a notice, not to the server's log.
  'SET auto_explain.log_level = notice',
];

/**
 * Runs `text` in a transaction rolled back, with `auto_explain` reporting every statement it
 * runs, those inside functions included, with EXPLAIN (ANALYZE, BUFFERS): what EXPLAIN of a
 * function call cannot show. Loading the module needs a superuser, as the test servers' is.
 */
export async function nestedPlans(
  sql: Client,
  text: string,
  values: unknown[] = [],
): Promise<{ plans: NestedPlan[]; rows: Record<string, unknown>[] }> {
  const plans: NestedPlan[] = [];
  const onNotice = (notice: { message?: string }) => {
    const json = /plan:\s*(\{[\s\S]*\})\s*$/.exec(notice.message ?? '')?.[1];
    if (!json) return;
    const report = JSON.parse(json) as { 'Query Text': string; Plan: PlanNode };
    plans.push({ queryText: report['Query Text'], plan: report.Plan });
  };
  await sql.query('BEGIN');
  try {
    for (const setting of AUTO_EXPLAIN) await sql.query(setting.replace(/^SET /, 'SET LOCAL '));
    sql.on('notice', onNotice);
    const { rows } = await sql.query(text, values);
    return { plans, rows };
  } finally {
    sql.removeListener('notice', onNotice);
    await sql.query('ROLLBACK');
  }
}
