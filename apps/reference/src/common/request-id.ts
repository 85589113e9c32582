import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { createParamDecorator, type ExecutionContext } from '@nestjs/common';

const HEADER = 'x-request-id';
const VALID = /^[\w.:-]{1,128}$/;

/** Takes the caller's `x-request-id` when it is sane, else makes one, and echoes it back. */
export function requestIdMiddleware(req: Request, res: Response, next: NextFunction): void {
  const given = req.header(HEADER);
  const id = given && VALID.test(given) ? given : randomUUID();
  (req as Request & { requestId: string }).requestId = id;
  res.setHeader(HEADER, id);
  next();
}

/** The request id of the current request, for the events it emits. */
export const RequestId = createParamDecorator((_: unknown, context: ExecutionContext): string => {
  const req = context.switchToHttp().getRequest<Request & { requestId?: string }>();
  return req.requestId ?? randomUUID();
});
