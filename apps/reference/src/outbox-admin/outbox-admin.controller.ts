import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  ParseUUIDPipe,
  Post,
  Query,
  ServiceUnavailableException,
} from '@nestjs/common';
import {
  InvalidOutboxAdminQueryError,
  OutboxAdmin,
  OutboxDispatcher,
  OutboxRepository,
  OutboxStoreError,
} from '@app/outbox';
import { DeadLettersQuery } from './dead-letters.query';
import { DiscardBody, ReplayBody } from './dead-letter-change.body';

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
    private readonly admin: OutboxAdmin,
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

  /** Dead (and with `includeRetrying=true`, retrying) events, newest first; `next` pages on. */
  @Get('dead-letters')
  deadLetters(@Query() query: DeadLettersQuery) {
    return answer(() =>
      this.admin.list(query.toFilter(), { limit: query.limit, after: query.after }),
    );
  }

  /** Dead events by type, failed handler and error fingerprint, largest first. */
  @Get('dead-letters/groups')
  deadLetterGroups(@Query() query: DeadLettersQuery) {
    return answer(() => this.admin.groups(query.toFilter()));
  }

  /**
   * Replays the selected dead events now (only `handlers` when given); `dryRun` reports what
   * would change. Answers `{ dryRun, ids, unchanged }`.
   */
  @Post('dead-letters/replay')
  @HttpCode(200)
  replay(@Body() body: ReplayBody) {
    return answer(() =>
      this.admin.replay(body.toSelector(), {
        handlers: body.handlers,
        dryRun: body.dryRun,
        actor: 'reference-app:http',
      }),
    );
  }

  /** Discards the selected events with a reason; they are never replayed and later swept. */
  @Post('dead-letters/discard')
  @HttpCode(200)
  discard(@Body() body: DiscardBody) {
    return answer(() =>
      this.admin.discard(body.toSelector(), {
        reason: body.reason,
        dryRun: body.dryRun,
        actor: 'reference-app:http',
      }),
    );
  }

  /** One event whole, whatever its state. */
  @Get('events/:id')
  async event(@Param('id', ParseUUIDPipe) id: string) {
    const event = await answer(() => this.admin.show(id));
    if (!event) throw new NotFoundException(`no outbox event ${id}`);
    return event;
  }
}

/** Bad input is the caller's (400); a store failure is the database's (503, scrubbed). */
async function answer<T>(query: () => Promise<T>): Promise<T> {
  try {
    return await query();
  } catch (error) {
    if (error instanceof InvalidOutboxAdminQueryError) throw new BadRequestException(error.message);
    if (error instanceof OutboxStoreError) throw new ServiceUnavailableException(error.message);
    throw error;
  }
}
