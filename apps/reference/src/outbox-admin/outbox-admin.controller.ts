import { Controller, Get, ServiceUnavailableException } from '@nestjs/common';
import { OutboxDispatcher, OutboxRepository } from '@app/outbox';

/**
 * What the outbox holds right now: events by state, the lag, the dispatcher. Counts come from
 * the bounded probe (`countLimit` each, a count equal to it meaning "at least"), so the page costs
 * the same at any backlog.
 */
@Controller('outbox')
export class OutboxAdminController {
  constructor(
    private readonly repository: OutboxRepository,
    private readonly dispatcher: OutboxDispatcher,
  ) {}

  @Get()
  async state() {
    const pending = await this.repository.pendingState();
    if (!pending.ok) throw new ServiceUnavailableException(pending.error.message);
    return {
      dispatcher: this.dispatcher.state,
      listener: this.dispatcher.listenerState,
      lagMs: pending.value.oldestDueWaitMs ?? 0,
      due: pending.value.due,
      retrying: pending.value.retrying,
      inFlight: pending.value.inFlight,
      expiredLeases: pending.value.expiredLeases,
      dead: pending.value.dead,
      countLimit: pending.value.countLimit,
      nextDueInMs: pending.value.nextDueInMs,
    };
  }
}
