import type { OutboxEventDetail } from '../../store/admin/event.types';
import { actions } from './actions.view';
import { html, type Html } from './html.util';
import { time } from './table.view';

/** One event whole: its fields, deliveries, failures, payload and metadata. */
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
