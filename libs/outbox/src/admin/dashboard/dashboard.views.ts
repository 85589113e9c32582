import type {
  DeadLetter,
  DeadLetterChange,
  DeadLetterGroup,
  DeadLetterList,
  DispatcherInfo,
  MinuteCount,
  OutboxEventDetail,
  OutboxStatus,
} from '../dead-letter.types';
import { formatDuration } from '../../common/format-duration.util';
import { html, Html } from './html.util';

/** Which dead letters an action is about: a group, or one event. */
export interface ActionTarget {
  type?: string;
  handler?: string;
  fingerprint?: string;
  id?: string;
}

const STYLE = `
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1rem 1.5rem; color: #1d2330; }
  h1 { font-size: 1.3rem; margin: 0 0 .75rem; } h2 { font-size: 1.05rem; margin: 1.5rem 0 .5rem; }
  a { color: #1f5fbf; } nav a { margin-right: 1rem; }
  table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #e3e6ec; vertical-align: top; }
  th { font-weight: 600; background: #f5f6f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
  .cards { display: flex; gap: .75rem; flex-wrap: wrap; } .card { border: 1px solid #e3e6ec; border-radius: 6px; padding: .5rem .8rem; min-width: 7rem; }
  .card b { display: block; font-size: 1.35rem; } .dead b { color: #b3261e; } .muted { color: #5f6b7a; }
  .notice { background: #e8f3e8; border: 1px solid #9ccc9c; padding: .5rem .8rem; border-radius: 6px; }
  form.inline { display: inline; } button { font: inherit; padding: .15rem .6rem; cursor: pointer; }
  button.danger { color: #b3261e; } pre { background: #f5f6f8; padding: .6rem; overflow: auto; }
  code { font-size: .92em; } input[type=text] { font: inherit; width: 28rem; max-width: 100%; }
`;

export function page(title: string, base: string, body: Html, refreshSeconds?: number): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        ${refreshSeconds ? html`<meta http-equiv="refresh" content="${refreshSeconds}" />` : ''}
        <title>${title} · outbox</title>
        <style>
          ${new Html(STYLE)}
        </style>
      </head>
      <body>
        <nav><a href="${base}">Overview</a><a href="${base}/dead">Dead letters</a></nav>
        <h1>${title}</h1>
        ${body}
      </body>
    </html>`.text;
}

const time = (at: Date | null) => (at ? at.toISOString().replace('T', ' ').slice(0, 19) : '–');

/** Deliveries per minute as an inline SVG line, oldest left. */
function sparkline(minutes: readonly MinuteCount[]): Html {
  const width = 360;
  const height = 48;
  const max = Math.max(1, ...minutes.map((m) => m.delivered));
  const step = minutes.length > 1 ? width / (minutes.length - 1) : width;
  const points = minutes
    .map((m, i) => `${(i * step).toFixed(1)},${(height - (m.delivered / max) * height).toFixed(1)}`)
    .join(' ');
  const total = minutes.reduce((sum, m) => sum + m.delivered, 0);
  return html`<figure>
    <svg
      role="img"
      aria-label="deliveries per minute, last ${minutes.length} minutes"
      width="${width}"
      height="${height + 2}"
      viewBox="0 -1 ${width} ${height + 2}"
    >
      <polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" points="${points}" />
    </svg>
    <figcaption class="muted" data-testid="throughput">
      ${total} delivered in the last ${minutes.length} minutes, at most ${max} a minute
    </figcaption>
  </figure>`;
}

function hidden(target: ActionTarget): Html {
  const fields = Object.entries(target as Record<string, string | undefined>).filter(
    (entry): entry is [string, string] => entry[1] !== undefined,
  );
  return html`${fields.map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
  )}`;
}

/** Replay and discard buttons: each leads to a confirmation page first. */
function actions(base: string, target: ActionTarget): Html {
  return html`<form class="inline" method="post" action="${base}/confirm">
      ${hidden(target)}<input type="hidden" name="action" value="replay" /><button type="submit">
        Replay
      </button>
    </form>
    <form class="inline" method="post" action="${base}/confirm">
      ${hidden(target)}<input type="hidden" name="action" value="discard" /><button
        type="submit"
        class="danger"
      >
        Discard
      </button>
    </form>`;
}

export function overview(input: {
  base: string;
  status: OutboxStatus;
  throughput: readonly MinuteCount[];
  groups: readonly DeadLetterGroup[];
  dispatchers: readonly DispatcherInfo[];
  notice: string | undefined;
}): Html {
  const { base, status, throughput, groups, dispatchers, notice } = input;
  const card = (label: string, value: string | number, extra = '') =>
    html`<div class="card ${extra}" data-testid="count-${label}"><b>${value}</b>${label}</div>`;
  return html` ${notice ? html`<p class="notice" role="status">${notice}</p>` : ''}
    <div class="cards">
      ${card('due', status.due)}${card('retrying', status.retrying)}${card('in flight', status.inFlight)}
      ${card('expired leases', status.expiredLeases)}${card('dead', status.dead, status.dead > 0 ? 'dead' : '')}
      ${card('discarded', status.discarded)}${card('lag', formatDuration(status.lagMs, '–'))}
    </div>
    <h2>Throughput</h2>
    ${sparkline(throughput)}
    <h2>Dispatchers</h2>
    ${dispatcherTable(dispatchers)}
    <h2>Dead letters by type, handler and error</h2>
    ${
      groups.length === 0
        ? html`<p data-testid="no-dead-letters">No dead letters.</p>`
        : html`<table data-testid="groups">
            <thead>
              <tr>
                <th>count</th>
                <th>type</th>
                <th>handler</th>
                <th>error</th>
                <th>last seen</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${groups.map(
                (g) =>
                  html`<tr>
                    <td class="n">${g.count}</td>
                    <td>${g.type}</td>
                    <td>${g.handler ?? '–'}</td>
                    <td>
                      <a
                        href="${base}/dead?${query({ type: g.type, handler: g.handler ?? undefined, fingerprint: g.fingerprint })}"
                        >${g.sampleError ?? '(no message)'}</a
                      >
                    </td>
                    <td>${time(g.lastSeenAt)}</td>
                    <td>
                      ${actions(base, { type: g.type, handler: g.handler ?? undefined, fingerprint: g.fingerprint })}
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    <h2>Undelivered by type</h2>
    <table>
      <thead>
        <tr>
          <th>type</th>
          <th>due</th>
          <th>retrying</th>
          <th>in flight</th>
          <th>dead</th>
          <th>discarded</th>
          <th>lag</th>
        </tr>
      </thead>
      <tbody>
        ${status.byType.map(
          (t) =>
            html`<tr>
              <td>${t.type}</td>
              <td class="n">${t.due}</td>
              <td class="n">${t.retrying}</td>
              <td class="n">${t.inFlight}</td>
              <td class="n">${t.dead}</td>
              <td class="n">${t.discarded}</td>
              <td class="n">${formatDuration(t.oldestDueWaitMs, '–')}</td>
            </tr>`,
        )}
      </tbody>
    </table>`;
}

function dispatcherTable(dispatchers: readonly DispatcherInfo[]): Html {
  if (dispatchers.length === 0) {
    return html`<p class="muted" data-testid="no-dispatchers">No dispatcher reports in.</p>`;
  }
  const row = (d: DispatcherInfo) =>
    html`<tr class="${d.reporting ? '' : 'muted'}">
      <td>${d.host}</td>
      <td class="n">${d.pid}</td>
      <td>${d.reporting ? d.state : html`<b>silent</b> (last: ${d.state})`}</td>
      <td>${d.listener}</td>
      <td class="n">${d.inFlight} / ${d.concurrency}</td>
      <td>${d.types ? d.types.join(', ') : 'all'}</td>
      <td>${time(d.startedAt)}</td>
      <td>${time(d.lastClaimAt)}</td>
      <td>${time(d.seenAt)}</td>
    </tr>`;
  return html`<table data-testid="dispatchers">
    <thead>
      <tr>
        <th>host</th>
        <th>pid</th>
        <th>state</th>
        <th>listener</th>
        <th>in flight</th>
        <th>types</th>
        <th>started</th>
        <th>last claim</th>
        <th>last report</th>
      </tr>
    </thead>
    <tbody>
      ${dispatchers.map(row)}
    </tbody>
  </table>`;
}

export function deadList(base: string, target: ActionTarget, list: DeadLetterList): Html {
  const row = (item: DeadLetter) =>
    html`<tr>
      <td>
        <a href="${base}/events/${item.id}"><code>${item.id}</code></a>
      </td>
      <td>${item.type}</td>
      <td>${item.state}</td>
      <td class="n">${item.attempts}</td>
      <td>${item.failedHandlers.map((h) => h.name).join(', ') || '–'}</td>
      <td>${item.lastError ?? '–'}</td>
      <td>${time(item.deadAt)}</td>
      <td>${item.state === 'dead' ? actions(base, { id: item.id }) : ''}</td>
    </tr>`;
  return html` <p class="muted">${describe(target)}</p>
    ${
      list.items.length === 0
        ? html`<p>No dead letters.</p>`
        : html`<table data-testid="dead-letters">
            <thead>
              <tr>
                <th>id</th>
                <th>type</th>
                <th>state</th>
                <th>attempts</th>
                <th>failed</th>
                <th>last error</th>
                <th>dead at</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${list.items.map(row)}
            </tbody>
          </table>`
    }
    ${list.next ? html`<p><a href="${base}/dead?${query({ ...target, after: list.next })}">Next page</a></p>` : ''}`;
}

export function eventDetail(base: string, event: OutboxEventDetail): Html {
  const state = event.dispatchedAt
    ? 'delivered'
    : event.discardedAt
      ? 'discarded'
      : event.deadAt
        ? 'dead'
        : 'live';
  return html` <table data-testid="event">
      <tbody>
        <tr>
          <th>id</th>
          <td><code>${event.id}</code></td>
        </tr>
        <tr>
          <th>state</th>
          <td data-testid="event-state">${state}</td>
        </tr>
        <tr>
          <th>type</th>
          <td>${event.type}</td>
        </tr>
        <tr>
          <th>aggregate</th>
          <td>${event.aggregateType} ${event.aggregateId}</td>
        </tr>
        <tr>
          <th>organization</th>
          <td>${event.organizationId ?? '–'}</td>
        </tr>
        <tr>
          <th>attempts</th>
          <td>${event.attempts}</td>
        </tr>
        <tr>
          <th>occurred</th>
          <td>${time(event.occurredAt)}</td>
        </tr>
        <tr>
          <th>next attempt</th>
          <td>
            ${time(state === 'delivered' || state === 'discarded' ? null : event.nextAttemptAt)}
          </td>
        </tr>
        <tr>
          <th>dead at</th>
          <td>${time(event.deadAt)}</td>
        </tr>
        <tr>
          <th>delivered at</th>
          <td>${time(event.dispatchedAt)}</td>
        </tr>
        ${
          event.discardedAt
            ? html`<tr>
                <th>discarded</th>
                <td>${time(event.discardedAt)}: ${event.discardReason}</td>
              </tr>`
            : ''
        }
        <tr>
          <th>last error</th>
          <td>${event.lastError ?? '–'}</td>
        </tr>
      </tbody>
    </table>
    ${state === 'dead' ? html`<p>${actions(base, { id: event.id })}</p>` : ''}
    <h2>Deliveries</h2>
    <pre>${JSON.stringify(event.deliveries, null, 2)}</pre>
    <h2>Failures</h2>
    <pre>${JSON.stringify(event.failures, null, 2)}</pre>
    <h2>Payload</h2>
    <pre>${JSON.stringify(event.payload, null, 2)}</pre>
    <h2>Metadata</h2>
    <pre>${JSON.stringify(event.metadata, null, 2)}</pre>`;
}

/** The dry run of an action, and the form that does it. */
export function confirmation(
  base: string,
  action: 'replay' | 'discard',
  target: ActionTarget,
  dryRun: DeadLetterChange,
): Html {
  const count = dryRun.ids.length;
  if (count === 0) {
    return html`<p>
        Nothing to ${action}: ${describe(target)} selects no event that can be changed now.
      </p>
      <p><a href="${base}">Back</a></p>`;
  }
  return html` <p data-testid="confirm-count">
      ${action === 'replay' ? 'Replay' : 'Discard'} <b>${count}</b> event${count === 1 ? '' : 's'}
      (${describe(target)})?
    </p>
    <p class="muted">
      ${action === 'replay' ? 'They become due now; the handlers that have not delivered them run again.' : 'They are never replayed again, and are deleted after the retention for discarded events.'}
    </p>
    <form method="post" action="${base}/${action}">
      ${hidden(target)}
      ${
        action === 'discard'
          ? html`<p>
              <label>Reason <input type="text" name="reason" required maxlength="500" /></label>
            </p>`
          : ''
      }
      <button type="submit" class="${action === 'discard' ? 'danger' : ''}">
        Confirm ${action}
      </button>
      <a href="${base}">Cancel</a>
    </form>`;
}

function describe(target: ActionTarget): string {
  if (target.id) return `event ${target.id}`;
  const parts = [
    target.type && `type ${target.type}`,
    target.handler && `handler ${target.handler}`,
    target.fingerprint && `error kind ${target.fingerprint.slice(0, 8)}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : 'every dead letter';
}

export function query(values: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value) params.set(key, value);
  return params.toString();
}

export function errorPage(status: number, message: string): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <title>${status} · outbox</title>
      </head>
      <body>
        <h1>${status}</h1>
        <p data-testid="error">${message}</p>
      </body>
    </html>`.text;
}
