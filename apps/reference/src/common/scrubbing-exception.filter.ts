import {
  ArgumentsHost,
  Catch,
  HttpException,
  HttpStatus,
  Logger,
  type ExceptionFilter,
} from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import { scrubError } from '@app/outbox';

/**
 * Unexpected errors become a plain 500 and one scrubbed log line. Nest's default handler logs
 * the error object whole, and a TypeORM `QueryFailedError` carries the failed query with its
 * parameters: request bodies, payloads and the secrets in them.
 */
@Catch()
export class ScrubbingExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('ExceptionsHandler');

  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const { httpAdapter } = this.adapterHost;
    const response: unknown = host.switchToHttp().getResponse();
    if (exception instanceof HttpException) {
      httpAdapter.reply(response, exception.getResponse(), exception.getStatus());
      return;
    }
    const clientError = asClientError(exception);
    if (clientError) {
      httpAdapter.reply(response, clientError, clientError.statusCode);
      return;
    }
    this.logger.error(`${scrubError(exception)}${stackFrames(exception)}`);
    httpAdapter.reply(
      response,
      { statusCode: HttpStatus.INTERNAL_SERVER_ERROR, message: 'Internal server error' },
      HttpStatus.INTERNAL_SERVER_ERROR,
    );
  }
}

/** The stack without its first line, which repeats the (unscrubbed) message. */
function stackFrames(exception: unknown): string {
  const stack = (exception as { stack?: unknown } | null)?.stack;
  if (typeof stack !== 'string') return '';
  const frames = stack.split('\n').filter((line) => /^\s+at /.test(line));
  return frames.length > 0 ? `\n${frames.join('\n')}` : '';
}

/**
 * Errors the body parser raises for the client's mistakes (http-errors: too large, bad
 * charset, aborted) carry their 4xx status and a message meant for the client.
 */
function asClientError(exception: unknown): { statusCode: number; message: string } | undefined {
  const { status, expose, message } = (exception ?? {}) as {
    status?: unknown;
    expose?: unknown;
    message?: unknown;
  };
  if (typeof status !== 'number' || status < 400 || status > 499 || expose !== true) return;
  return { statusCode: status, message: typeof message === 'string' ? message : 'Bad request' };
}
