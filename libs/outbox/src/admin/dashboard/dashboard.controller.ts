import {
  applyDecorators,
  Body,
  Catch,
  Controller,
  HttpException,
  type ArgumentsHost,
  type ExceptionFilter,
  ForbiddenException,
  Get,
  Header,
  HttpCode,
  Inject,
  Logger,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
  type CanActivate,
  type Type,
} from '@nestjs/common';
import type { DeadLetterSelector } from '../../store/admin/dead-letter.types';
import {
  InvalidOutboxAdminQueryError,
  OutboxAdminChangeInProgressError,
  OutboxStoreError,
} from '../../outbox.errors';
import { OutboxAdmin } from '../outbox.admin';
import { DEFAULT_MAX_ROWS } from '../change-bounds.util';
import { isUuid } from '../../common/uuid.util';
import { scrubError } from '../../common/scrub-error.util';
import type { ActionTarget } from './actions.view';
import { confirmation } from './confirmation.view';
import { blockedKeysList } from './blocked-keys.view';
import { deadList } from './dead-letters.view';
import { eventDetail } from './event.view';
import { errorPage, page } from './layout.view';
import { overview } from './overview.view';
import { noticeOf, noticeQuery } from './change-notice';

/** The request as the dashboard reads it (Express and Fastify both give these). */
interface DashboardRequest {
  headers: Record<string, string | string[] | undefined>;
}

/** The response as the dashboard writes a redirect (Express and Fastify both have these). */
interface DashboardResponse {
  redirect?(status: number, url: string): void;
  status?(code: number): { redirect?(url: string): void };
  /** Express. */
  setHeader?(name: string, value: string): unknown;
  /** Fastify. */
  header?(name: string, value: string): unknown;
}

type Form = Record<string, string | undefined>;

/** Events one change of the page takes (by filter); a confirm goes on with the rest. */
const CHANGE_MAX_ROWS = DEFAULT_MAX_ROWS;

/** Token of the dashboard's path, for the controller made for it. */
export const OUTBOX_DASHBOARD_PATH = Symbol('OUTBOX_DASHBOARD_PATH');

/**
 * The dashboard's routes under `path`, behind `guard`: a controller class made for one mount,
 * since Nest reads a controller's path and guards from its decorators. Everything shown comes
 * from `OutboxAdmin`; every change goes through a confirmation page that shows the dry run, and
 * only a same-origin form may post it.
 */
export function createDashboardController(
  path: string,
  guard: Type<CanActivate> | CanActivate | undefined,
): Type<unknown> {
  const guards = guard ? [guard] : [];

  @Controller(path)
  @UseGuards(...guards)
  @UseFilters(DashboardErrors)
  class OutboxDashboardController {
    constructor(
      private readonly admin: OutboxAdmin,
      @Inject(OUTBOX_DASHBOARD_PATH) private readonly base: string,
    ) {}

    @Get()
    @PageHeaders()
    async overview(@Query() form: Form): Promise<string> {
      const [status, throughput, groups, instances, partitions, limits] = await Promise.all([
        this.admin.status(),
        this.admin.throughput(60),
        this.admin.groups(),
        this.admin.instances(),
        this.admin.partitions(),
        this.admin.limits(),
      ]);
      const body = overview({
        base: this.base,
        status,
        throughput,
        groups,
        instances,
        partitions,
        limits,
        notice: noticeOf(form),
      });
      return page('Outbox', this.base, body, 30);
    }

    @Get('dead')
    @PageHeaders()
    async dead(@Query() form: Form): Promise<string> {
      const target = targetOf(form);
      const list = await this.admin.list(filterOf(target), {
        limit: 100,
        after: typeof form.after === 'string' ? form.after : undefined,
      });
      return page('Dead letters', this.base, deadList(this.base, target, list));
    }

    @Get('blocked')
    @PageHeaders()
    async blocked(@Query() form: Form): Promise<string> {
      const text = (name: string) =>
        typeof form[name] === 'string' && form[name] !== '' ? form[name] : undefined;
      const target = { handler: text('handler'), key: text('key') };
      const list = await this.admin.blockedKeys({ ...target, limit: 100, after: text('after') });
      return page('Blocked keys', this.base, blockedKeysList(this.base, target, list));
    }

    @Get('events/:id')
    @PageHeaders()
    async event(@Param('id') id: string): Promise<string> {
      const event = isUuid(id) ? await this.admin.show(id) : null;
      if (!event) throw new NotFoundException(`no outbox event ${id}`);
      return page('Event', this.base, eventDetail(this.base, event));
    }

    @Post('confirm')
    @HttpCode(200)
    @PageHeaders()
    async confirm(@Req() request: DashboardRequest, @Body() form: Form): Promise<string> {
      sameOrigin(request);
      const action = actionOf(form);
      const target = targetOf(form);
      const selector = selectorOf(target);
      // Bounded: by filter, one more than a change takes, to tell "more than" apart.
      const bounds = boundsOf(target, CHANGE_MAX_ROWS + 1);
      const dryRun =
        action === 'replay'
          ? await this.admin.replay(selector, { dryRun: true, ...bounds })
          : await this.admin.discard(selector, { reason: 'dry run', dryRun: true, ...bounds });
      const title = action === 'replay' ? 'Replay' : 'Discard';
      return page(
        title,
        this.base,
        confirmation(this.base, action, target, dryRun, CHANGE_MAX_ROWS),
      );
    }

    @Post('replay')
    async replay(
      @Req() request: DashboardRequest,
      @Body() form: Form,
      @Res() response: DashboardResponse,
    ): Promise<void> {
      sameOrigin(request);
      const target = targetOf(form);
      const change = await this.admin.replay(selectorOf(target), {
        actor: actorOf(request),
        ...boundsOf(target, CHANGE_MAX_ROWS),
      });
      redirect(response, `${this.base}?${noticeQuery('replay', target, change)}`);
    }

    @Post('discard')
    async discard(
      @Req() request: DashboardRequest,
      @Body() form: Form,
      @Res() response: DashboardResponse,
    ): Promise<void> {
      sameOrigin(request);
      const target = targetOf(form);
      const change = await this.admin.discard(selectorOf(target), {
        reason: typeof form.reason === 'string' ? form.reason : '',
        actor: actorOf(request),
        ...boundsOf(target, CHANGE_MAX_ROWS),
      });
      redirect(response, `${this.base}?${noticeQuery('discard', target, change)}`);
    }
  }
  return OutboxDashboardController;
}

/**
 * Bad input is the caller's (400), a store failure the database's (503, its message scrubbed),
 * each as a short page; HTTP errors (the guard's 403, a 404) keep their status.
 */
@Catch()
class DashboardErrors implements ExceptionFilter {
  catch(error: unknown, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<{
      status(code: number): {
        type?(t: string): unknown;
        header?(name: string, value: string): unknown;
        send(body: string): unknown;
      };
    }>();
    const [status, message] =
      error instanceof HttpException
        ? [error.getStatus(), error.message]
        : error instanceof InvalidOutboxAdminQueryError
          ? [400, error.message]
          : error instanceof OutboxAdminChangeInProgressError
            ? [409, error.message]
            : error instanceof OutboxStoreError
              ? [503, error.message]
              : [500, 'the dashboard failed; see the application log'];
    if (status === 500) new Logger('Outbox').error(`Outbox dashboard: ${scrubError(error)}`);
    const reply = response.status(status);
    reply.type?.('text/html; charset=utf-8');
    for (const [name, value] of SAFE_HEADERS) reply.header?.(name, value);
    reply.send(errorPage(status, message));
  }
}

/**
 * On every response, pages, errors and redirects alike: never cached (payloads and errors are
 * on these pages), never sniffed as anything but what it says, never framed (a framing site
 * could make a click replay).
 */
const SAFE_HEADERS: ReadonlyArray<[string, string]> = [
  ['Cache-Control', 'no-store'],
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Content-Security-Policy', "frame-ancestors 'none'"],
];

/** Every page: HTML, with the safe headers. */
function PageHeaders(): MethodDecorator {
  return applyDecorators(
    Header('Content-Type', 'text/html; charset=utf-8'),
    ...SAFE_HEADERS.map(([name, value]) => Header(name, value)),
  );
}

/** After a change, back to the overview (303: the browser follows with a GET). */
function redirect(response: DashboardResponse, url: string): void {
  for (const [name, value] of SAFE_HEADERS) {
    if (response.setHeader) response.setHeader(name, value);
    else response.header?.(name, value);
  }
  if (response.redirect) return response.redirect(303, url);
  response.status?.(303).redirect?.(url);
}

/**
 * Forms post only from the page itself, so a forged form on another site cannot ride on the
 * operator's session: the browser's `Origin` must name this host; without it, `Sec-Fetch-Site`
 * must say same-origin; without both (not a browser form), the post is refused.
 */
function sameOrigin(request: DashboardRequest): void {
  const origin = header(request, 'origin');
  const host = header(request, 'x-forwarded-host') ?? header(request, 'host');
  if (origin !== undefined) {
    let originHost: string | undefined;
    try {
      originHost = new URL(origin).host;
    } catch {
      originHost = undefined;
    }
    if (originHost !== undefined && originHost === host) return;
  } else if (header(request, 'sec-fetch-site') === 'same-origin') {
    return;
  }
  throw new ForbiddenException('the form did not come from this page');
}

function header(request: DashboardRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Who acted, as far as the page can tell; the guard knows better, and the app may log it. */
function actorOf(request: DashboardRequest): string {
  const agent = header(request, 'user-agent') ?? 'unknown browser';
  return `dashboard (${agent.slice(0, 80)})`;
}

function actionOf(form: Form): 'replay' | 'discard' {
  if (form.action === 'replay' || form.action === 'discard') return form.action;
  throw new InvalidOutboxAdminQueryError('action', form.action, "'replay' or 'discard'");
}

function targetOf(form: Form): ActionTarget {
  const text = (name: string) =>
    typeof form[name] === 'string' && form[name] !== '' ? form[name] : undefined;
  return {
    id: text('id'),
    type: text('type'),
    handler: text('handler'),
    fingerprint: text('fingerprint'),
    cursor: text('cursor'),
  };
}

/** A change by filter's bounds: at most `maxRows`, after the target's cursor; none by id. */
function boundsOf(target: ActionTarget, maxRows: number) {
  return target.id ? {} : { maxRows, after: target.cursor };
}

function filterOf(target: ActionTarget) {
  return {
    types: target.type ? [target.type] : undefined,
    handler: target.handler,
    fingerprint: target.fingerprint,
  };
}

function selectorOf(target: ActionTarget): DeadLetterSelector {
  if (target.id) return { ids: [target.id] };
  return { filter: filterOf(target) };
}
