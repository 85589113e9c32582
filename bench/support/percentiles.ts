/** The value at or below which `p` percent of `sorted` (ascending) lies: nearest rank. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export function mean(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
  n: number;
}

export function summarizeLatency(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
    n: sorted.length,
  };
}

export function formatLatency(s: LatencySummary): string {
  const ms = (value: number) => value.toFixed(2);
  return `p50 ${ms(s.p50)} / p95 ${ms(s.p95)} / p99 ${ms(s.p99)} / max ${ms(s.max)} ms (n=${s.n})`;
}
