/**
 * An indicator's results under `key`, built as Terminus's `HealthIndicatorService.check(key)`
 * builds them (`{ [key]: { ...data, status } }`), so the outbox needs Terminus only where the
 * app serves a health endpoint.
 */
export function indicatorResult<Key extends string, Data extends object>(key: Key) {
  type Result = Record<Key, Data & { status: 'up' | 'down' }>;
  const result = (status: 'up' | 'down', data: Data) => ({ [key]: { ...data, status } }) as Result;
  return {
    up: (data: Data) => result('up', data),
    down: (data: Data) => result('down', data),
  };
}
