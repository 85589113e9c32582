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
    // `req.is` answers null when there is no body, false when the body is another type.
    if (req.is('application/json') !== false) return next();
    res.status(415).json({
      statusCode: 415,
      message: 'the request body must be JSON (content-type: application/json)',
    });
  };
}

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(`${prefix}/`);
}
