import type { OutboxHandlerFn, OutboxIsolationLevel } from './outbox-handler.types';
import type { HandlerPolicy } from './handler.policy';
import type { HandlerLimit } from './handler-limit';

/** A handler as the registry holds it, validated, with the policy it settles by. */
export interface RegisteredHandler {
  readonly name: string;
  readonly handle: OutboxHandlerFn;
  /** Where the handler is declared (`Class.method`), for error messages. */
  readonly location: string;
  /** Its time budget: its own `timeoutMs`, else the module's `handlerTimeoutMs`. */
  readonly budgetMs: number;
  /** Set for a transactional handler: the isolation level of its transaction. */
  readonly isolationLevel: OutboxIsolationLevel | undefined;
  readonly policy: HandlerPolicy;
  /** Its limits across processes, checked before each run; null for most handlers. */
  readonly limit: HandlerLimit | null;
}
