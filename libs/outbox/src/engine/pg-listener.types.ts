/**
 * Where the engine's LISTEN connection stands. Apart from the listener itself, so the public
 * declarations do not reach `pg`'s types (an app need not install `@types/pg`).
 */
export type PgListenerState = 'idle' | 'connecting' | 'listening' | 'reconnecting' | 'stopped';
