/** Every message the module raises, in one place so wording stays consistent. */
export const OutboxMessages = {
  transactionRequired: (operation: string) =>
    `${operation} must run inside a transaction: pass the EntityManager of an open TypeORM ` +
    `transaction (dataSource.transaction(manager => ...)) so the event commits or rolls back ` +
    `with your changes`,
  payloadNotSerializable: (eventType: string, path: string, reason: string) =>
    `Outbox event "${eventType}" is not JSON-serialisable: ${path} is ${reason}`,
  invalidEvent: (field: string, value: unknown, expected: string) =>
    `Invalid outbox event: ${field} must be ${expected}, got ${describeValue(value)}`,
  storeFailure: (operation: string, detail: string) => `Outbox ${operation} failed: ${detail}`,
} as const;

export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
