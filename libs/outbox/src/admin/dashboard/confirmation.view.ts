import type { DeadLetterChange } from '../../store/admin/dead-letter.types';
import { describe, hidden, type ActionTarget } from './actions.view';
import { html, type Html } from './html.util';

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
