/** A duration as an operator reads it (`850 ms`, `4.2 s`, `17 min`, `3.5 h`); `-` for none. */
export function formatDuration(ms: number | null, none = '-'): string {
  if (ms === null) return none;
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7_200_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
