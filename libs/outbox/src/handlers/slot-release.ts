import type { HandlerContext } from './outbox-handler.types';

/**
 * The key under which a running handler's context carries its slot release. A symbol, not a
 * field of `HandlerContext`: only the module's own relays use it, and it stays out of the
 * public type and out of what a handler sees when it lists its context.
 */
export const RELEASE_SLOT = Symbol('outbox.releaseSlot');

/** A handler context that can give its event's slot back before the handler returns. */
export interface SlotReleasingContext extends HandlerContext {
  [RELEASE_SLOT]?: () => void;
}

/**
 * Gives the event's slot back while the handler goes on waiting: for a handler whose remaining
 * work is a wait on someone else (a relay waiting for its broker's confirm), so the slot starts
 * another event instead of holding still. The handler still ends, succeeds or fails, and is
 * settled exactly as before; the caller bounds how many such waits it keeps (a relay's
 * `maxInFlight`). The slot frees once every handler of the event has returned or released it.
 */
export function releaseSlot(context: HandlerContext): void {
  (context as SlotReleasingContext)[RELEASE_SLOT]?.();
}
