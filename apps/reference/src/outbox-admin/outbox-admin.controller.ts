import {
  BadRequestException,
  Body,
  ConflictException,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  ParseUUIDPipe,
  Post,
  Query,
  ServiceUnavailableException,
  UseGuards,
} from '@nestjs/common';
import {
  InvalidOutboxAdminQueryError,
  OutboxAdmin,
  OutboxAdminChangeInProgressError,
  OutboxHealthIndicator,
  OutboxStoreError,
} from '@app/outbox';
import { OperatorGuard } from '../auth/operator.guard';
import { DeadLettersQuery } from './dead-letters.query';
import { DiscardBody, ReplayBody } from './dead-letter-change.body';

/**
 * What the outbox holds right now: events by state, the lag, the state of this instance's engine. The
 * figures are the health indicator's (what `GET /health` reports under `outbox`): counts read
 * from indexes and capped at `countLimit` (a count equal to it means "at least"), so the page
 * costs the same at any backlog. `OutboxAdmin.status()` has exact counts by type, at the price
 * of reading every undelivered event: the dashboard's figures. Operators only.
 */
@Controller('outbox')
@UseGuards(OperatorGuard)
export class OutboxAdminController {
  constructor(
    private readonly health: OutboxHealthIndicator,
    private readonly admin: OutboxAdmin,
  ) {}

  @Get()
  async state() {
    const { outbox } = await this.health.isHealthy('outbox');
    // Without counts, the state query failed (the message says why); a stopping engine or a
    // lag is no reason to refuse the page.
    if (outbox.due === undefined) throw new ServiceUnavailableException(outbox.message);
    return {
      // The engine's state, under the key this page has always had.
      dispatcher: outbox.state,
      listener: outbox.listener,
      lagMs: outbox.lagMs,
      due: outbox.due,
      retrying: outbox.retrying,
      inFlight: outbox.inFlight,
      expiredLeases: outbox.expiredLeases,
      dead: outbox.dead,
      countLimit: outbox.countLimit,
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
   * would change. Answers `{ dryRun, count, countsByType, sampleIds, ids, unchanged, cursor,
   * stoppedBy }`; a filter stops at 10,000 events, and `after: cursor` goes on.
   */
  @Post('dead-letters/replay')
  @HttpCode(200)
  replay(@Body() body: ReplayBody) {
    return answer(() =>
      this.admin.replay(body.toSelector(), {
        rerun: body.handlers,
        dryRun: body.dryRun,
        after: body.after,
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
        after: body.after,
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

/**
 * Bad input is the caller's (400); a change by filter while another runs conflicts (409); a
 * store failure is the database's (503, scrubbed).
 */
async function answer<T>(query: () => Promise<T>): Promise<T> {
  try {
    return await query();
  } catch (error) {
    if (error instanceof InvalidOutboxAdminQueryError) throw new BadRequestException(error.message);
    if (error instanceof OutboxAdminChangeInProgressError) {
      throw new ConflictException(error.message);
    }
    if (error instanceof OutboxStoreError) throw new ServiceUnavailableException(error.message);
    throw error;
  }
}
