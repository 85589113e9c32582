import { html, type Html, type Part } from './html.util';

/** One column of a table: its header, and what it shows of each row. */
export interface Column<Row> {
  header: string;
  cell: (row: Row) => Part;
  /**
   * Counts, durations, ids that are numbers: the header and every cell under it sit on the
   * right (class `n`), so a number always reads under its own header.
   */
  numeric?: boolean;
}

export interface TableOptions<Row> {
  /** `data-testid` of the table. */
  testId?: string;
  /** A class of each row (an instance that stopped reporting is muted). */
  rowClass?: (row: Row) => string;
}

/** A table with one header row: each column declared once, its header and cells aligned alike. */
export function table<Row>(
  columns: readonly Column<Row>[],
  rows: readonly Row[],
  options: TableOptions<Row> = {},
): Html {
  const { testId, rowClass } = options;
  const align = (column: Column<Row>) => (column.numeric ? html` class="n"` : '');
  const row = (item: Row) =>
    html`<tr${rowClass ? html` class="${rowClass(item)}"` : ''}>
      ${columns.map((column) => html`<td${align(column)}>${column.cell(item)}</td>`)}
    </tr>`;
  return html`<table${testId ? html` data-testid="${testId}"` : ''}>
    <thead>
      <tr>
        ${columns.map((column) => html`<th${align(column)}>${column.header}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${rows.map(row)}
    </tbody>
  </table>`;
}

/** A time as the tables show it: UTC to the second, or a dash when there is none. */
export const time = (at: Date | null): string =>
  at ? at.toISOString().replace('T', ' ').slice(0, 19) : '–';
