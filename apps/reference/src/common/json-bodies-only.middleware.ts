import type { NextFunction, Request, Response } from 'express';

/** Methods that carry a body the API acts on. */
const WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Refuses with 415, before any body is parsed, a request body that is not JSON, except under
 * `formPaths` (the dashboard's forms). A browser sends a cross-site form (urlencoded, multipart
 * or text/plain) without asking first; it cannot send JSON without a CORS preflight, which this
 * app never answers. A request without a body (`POST .../pay`) needs no type.
 */
export function requireJsonBodies(formPaths: readonly string[]) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!WITH_BODY.has(req.method) || formPaths.some((path) => under(req.path, path))) {
      return next();
    }
    if (isEmpty(req) || req.is('application/json')) return next();
    res.status(415).json({
      statusCode: 415,
      message: 'the request body must be JSON (content-type: application/json)',
    });
  };
}

/** No body at all, or one of length 0 (what a client sends for a POST without a body). */
function isEmpty(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
}

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}
