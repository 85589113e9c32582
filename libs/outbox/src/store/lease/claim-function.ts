import { Logger } from '@nestjs/common';
import { OutboxMessages } from '../../outbox.messages';
import type { OutboxResult } from '../outbox.result';

/** How long claims go without the function before it is looked up again. */
export const CLAIM_FUNCTION_LOOK_AGAIN_MS = 60_000;

/** SQLSTATE of a call to a function the database does not have. */
export const UNDEFINED_FUNCTION = '42883';

/**
 * Whether live claims go through `outbox_claim_live_v2`. Looked up at the first live claim.
 * While the function is absent (pods of this version started before its migration ran, or an
 * app that has not run it yet) claims send the statement itself, and the lookup is repeated a
 * minute later, so a rollout needs no restart once the migration has run. A call that finds the
 * function gone (the migration reverted) makes the next claim look again.
 */
export class ClaimFunction {
  private readonly logger = new Logger('Outbox');
  private present: boolean | undefined;
  private lookedAt = 0;

  constructor(
    private readonly lookUp: () => Promise<OutboxResult<boolean>>,
    private readonly now: () => number = Date.now,
  ) {}

  async use(): Promise<boolean> {
    if (this.present) return true;
    if (this.present === false && this.now() - this.lookedAt < CLAIM_FUNCTION_LOOK_AGAIN_MS) {
      return false;
    }
    const found = await this.lookUp();
    this.lookedAt = this.now();
    // A failed lookup (the database away) decides nothing: the claim after it fails too.
    if (!found.ok) return this.present ?? false;
    if (!found.value && this.present === undefined) {
      this.logger.warn(
        OutboxMessages.claimFunctionMissing(
          'outbox_claim_live_v2',
          'OutboxOrdering1773000000000',
          CLAIM_FUNCTION_LOOK_AGAIN_MS,
        ),
      );
    }
    this.present = found.value;
    return found.value;
  }

  /** The function was not there when called: look it up again at the next claim. */
  forget(): void {
    this.present = undefined;
  }
}
