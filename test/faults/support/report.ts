import { formatNumber, type Outcome, type Scenario } from './scenario';

export interface ScenarioRun {
  index: number;
  scenario: Scenario;
  outcome: Outcome;
  error?: string;
  durationMs: number;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)]
    .map((l) => `  ${l}`)
    .join('\n');
}

export function passed(run: ScenarioRun): boolean {
  return !run.error && run.outcome.passed;
}

/** The figures and checks of one scenario, printed as soon as it ends. */
export function printScenario(run: ScenarioRun): void {
  const { outcome } = run;
  const verdict = passed(run) ? 'PASSED' : 'FAILED';
  const lines = [''];
  if (outcome.figures.length > 0) lines.push(table(['figure', 'value'], outcome.figures));
  if (outcome.checks.length > 0) {
    lines.push('');
    lines.push(
      table(
        ['check', 'actual', ''],
        outcome.checks.map((c) => [c.what, c.actual, c.ok ? 'ok' : 'FAIL']),
      ),
    );
  }
  for (const note of outcome.notes) lines.push('', `  ${note}`);
  if (run.error) lines.push('', `  error: ${run.error.split('\n').join('\n  ')}`);
  lines.push(
    '',
    `  ${verdict}: ${run.index} ${run.scenario.name} in ${(run.durationMs / 1000).toFixed(1)} s`,
  );
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** One row per scenario, then the `N passed, M failed` line. */
export function printSummary(runs: ScenarioRun[]): void {
  const cell = (value: number | string | undefined) =>
    value === undefined ? '-' : typeof value === 'number' ? formatNumber(value) : value;
  const rows = runs.map((run) => [
    `${run.index} ${run.scenario.name}`,
    cell(run.outcome.summary.produced),
    cell(run.outcome.summary.lost),
    cell(run.outcome.summary.duplicates),
    cell(run.outcome.summary.extraCalls),
    cell(run.outcome.summary.recover),
    `${(run.durationMs / 1000).toFixed(1)} s`,
    passed(run) ? 'passed' : 'FAILED',
  ]);
  const failed = runs.filter((run) => !passed(run)).length;
  process.stdout.write(
    `\n${table(
      [
        'scenario',
        'produced',
        'lost',
        'duplicates',
        'extra calls',
        'resume / recover',
        'time',
        'result',
      ],
      rows,
    )}\n\n${runs.length - failed} passed, ${failed} failed\n`,
  );
}
