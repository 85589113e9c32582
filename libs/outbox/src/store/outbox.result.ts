import type { OutboxStoreError } from '../outbox.errors';

/** What a repository call returns: a value, or the store error that prevented it. */
export type OutboxResult<T> = { ok: true; value: T } | { ok: false; error: OutboxStoreError };

export const ok = <T>(value: T): OutboxResult<T> => ({ ok: true, value });
export const fail = <T>(error: OutboxStoreError): OutboxResult<T> => ({ ok: false, error });
