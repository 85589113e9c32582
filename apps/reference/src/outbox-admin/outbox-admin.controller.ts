import { Controller, Get, Inject, ServiceUnavailableException } from '@nestjs/common';
import {
  OUTBOX_OPTIONS,
  OutboxDispatcher,
  OutboxRepository,
  type ResolvedOutboxOptions,
} from '@app/outbox';

/** What the outbox holds right now: events by state, the lag, the dispatcher. */
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
      lagMs: pending.value.oldestDueWaitMs ?? 0,
      due: pending.value.due,
      retrying: pending.value.retrying,
      inFlight: pending.value.inFlight,
      overdue: pending.value.expiredLeases,
      dead: pending.value.dead,
      nextDueInMs: pending.value.nextDueInMs,
    };
  }
}
