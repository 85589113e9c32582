import { Logger } from '@nestjs/common';
import { OutboxMessages } from '../../outbox.messages';
import type { OutboxResult } from '../outbox.result';

/** How long claims go without a function before it is looked up again. */
export const CLAIM_FUNCTION_LOOK_AGAIN_MS = 60_000;

/** SQLSTATE of a call to a function the database does not have. */
export const UNDEFINED_FUNCTION = '42883';

/**
 * The claim functions a database has: `outbox_claim_live_v2` (`chained`), and
 * `outbox_claim_fair_v1` with its index (`fair`).
 */
export interface ClaimFunctions {
  chained: boolean;
  fair: boolean;
}

const NONE: ClaimFunctions = { chained: false, fair: false };

/**
 * Which function live claims go through. Looked up at the first live claim. While one is absent
 * (pods of this version started before its migration ran, or an app that has not run it yet)
 * claims go through the one before it, or send the statement itself, and the lookup is repeated
 * a minute later, so a rollout needs no restart once the migration has run. A call that finds
 * the function gone (the migration reverted) makes the next claim look again.
 */
export class ClaimFunction {
  private readonly logger = new Logger('Outbox');
  private present: ClaimFunctions | undefined;
  private lookedAt = 0;
  private warnedFair = false;

  constructor(
    private readonly lookUp: () => Promise<OutboxResult<ClaimFunctions>>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The functions to use; `fair`: the caller wants fair claims (only then is its absence news). */
  async use(fair = false): Promise<ClaimFunctions> {
    const known = this.present;
    if (known && known.chained && (known.fair || !fair)) return known;
    if (known && this.now() - this.lookedAt < CLAIM_FUNCTION_LOOK_AGAIN_MS) return known;
    const found = await this.lookUp();
    this.lookedAt = this.now();
    // A failed lookup (the database away) decides nothing: the claim after it fails too.
    if (!found.ok) return known ?? NONE;
    if (!found.value.chained && known === undefined) {
      this.logger.warn(
        OutboxMessages.claimFunctionMissing(
          'outbox_claim_live_v2',
          'OutboxOrdering1773000000000',
          CLAIM_FUNCTION_LOOK_AGAIN_MS,
        ),
      );
    }
    if (fair && !found.value.fair && !this.warnedFair) {
      this.warnedFair = true;
      this.logger.warn(OutboxMessages.fairClaimMissing(CLAIM_FUNCTION_LOOK_AGAIN_MS));
    }
    this.present = found.value;
    return found.value;
  }

  /** A function was not there when called: look them up again at the next claim. */
  forget(): void {
    this.present = undefined;
  }
}
