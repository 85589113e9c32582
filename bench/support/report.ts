/** One line of the summary table. */
export interface Figure {
  figure: string;
  value: string;
  target: string;
}

/** `12,345` */
export function count(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** `0.83 ×` */
export function times(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)} ×` : 'n/a';
}

export function ms(value: number, digits = 2): string {
  return `${value.toFixed(digits)} ms`;
}

export function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
}

/** A line printed while a scenario runs, indented under its heading. */
export function note(line: string): void {
  console.log(`  ${line}`);
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The figures as a Markdown table, columns padded so it also reads well in a terminal. */
export function markdownTable(figures: readonly Figure[]): string {
  const rows = figures.map((f) => [f.figure, f.value, f.target].map(escapeCell));
  const header = ['Figure', 'Value', 'Target'];
  const widths = header.map((h, column) =>
    Math.max(h.length, ...rows.map((row) => row[column].length)),
  );
  const line = (cells: string[]) =>
    `| ${cells.map((cell, column) => cell.padEnd(widths[column])).join(' | ')} |`;
  return [
    line(header),
    `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`,
    ...rows.map(line),
  ].join('\n');
}

/** The message of whatever was thrown, on one line and not too long for a table cell. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}
