import type { NextFunction, Request, Response } from 'express';
import { isAllowedHost, type AllowedHosts } from './allowed-hosts';

/** Readiness and liveness, which an orchestrator probes. */
const HEALTH_PATHS = new Set(['/health', '/health/live']);

/**
 * Refuses, with 421 Misdirected Request and before any route runs, a request whose `Host` (or
 * `X-Forwarded-Host`, when a proxy set one) is not in `ALLOWED_HOSTS`.
 *
 * What it protects against: DNS rebinding. A page on evil.example whose name is made to
 * resolve to 127.0.0.1 reaches this app from the victim's browser as a same-origin request for
 * evil.example, which a check of the peer address (the socket is loopback) lets through; its
 * `Host` still says evil.example, and is refused here. It also keeps the dashboard's
 * same-origin check honest: the host an `Origin` is compared with is one of ours.
 *
 * What it does not protect against: anyone who may send the allowed `Host` (any client that
 * reaches the port can set it; curl does by default). It is not authentication: the operator
 * token and the organizations' API keys are.
 *
 * `GET /health` and `GET /health/live` are answered for any host: an orchestrator's probe names
 * the pod's address (Kubernetes sends `Host: <pod IP>:<port>`), and the probe must not fail on a
 * name. The health answers hold states and counts, nothing a rebound page could use.
 */
export function refuseUnknownHosts(allowed: AllowedHosts) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.method === 'GET' && HEALTH_PATHS.has(req.path)) return next();
    const forwarded = req.headers['x-forwarded-host'];
    const hosts = [req.headers.host, ...(forwarded === undefined ? [] : [forwarded].flat())];
    if (hosts.every((host) => isAllowedHost(allowed, host))) return next();
    res.status(421).json({
      statusCode: 421,
      message: 'this server does not answer for that host (see ALLOWED_HOSTS)',
    });
  };
}
