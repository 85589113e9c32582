import { Controller, Get, Inject, ServiceUnavailableException } from '@nestjs/common';
import {
  OUTBOX_OPTIONS,
  OutboxDispatcher,
  OutboxRepository,
  type ResolvedOutboxOptions,
} from '@app/outbox';

/** What the outbox holds right now: pending and dead events, the lag, the dispatcher. */
@Controller('outbox')
export class OutboxAdminController {
  constructor(
    private readonly repository: OutboxRepository,
    private readonly dispatcher: OutboxDispatcher,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  @Get()
  async state() {
    const pending = await this.repository.pendingState({ deadRetryMs: this.options.deadRetryMs });
    if (!pending.ok) throw new ServiceUnavailableException(pending.error.message);
    return {
      dispatcher: this.dispatcher.state,
      listener: this.dispatcher.listenerState,
      pending: pending.value.live,
      dead: pending.value.dead,
      lagMs: pending.value.oldestLiveAgeMs ?? 0,
      nextDueInMs: pending.value.nextDueInMs,
    };
  }
}
