import type { DeadLetterChange } from '../../store/admin/dead-letter.types';
import { describe, hidden, type ActionTarget } from './actions.view';
import { html, type Html } from './html.util';
import { table, type Column } from './table.view';

const number = (n: number) => n.toLocaleString('en-US');

/** How many of each type the dry run counted. */
const TYPE_COLUMNS: readonly Column<[string, number]>[] = [
  { header: 'type', cell: ([type]) => type },
  { header: 'counted', cell: ([, n]) => number(n), numeric: true },
];

/**
 * The dry run of an action, and the form that does it. A dry run by filter counts at most one
 * more than a change takes (`maxRows`), so a large selection reads "more than"; the change then
 * takes the first `maxRows`, and the overview offers to go on.
 */
export function confirmation(
  base: string,
  action: 'replay' | 'discard',
  target: ActionTarget,
  dryRun: DeadLetterChange,
  maxRows: number,
): Html {
  const { count } = dryRun;
  if (count === 0) {
    return html`<p>
        Nothing to ${action}: ${describe(target)} selects no event that can be changed now.
      </p>
      <p><a href="${base}">Back</a></p>`;
  }
  const verb = action === 'replay' ? 'Replay' : 'Discard';
  const how =
    dryRun.cursor === null
      ? html`${verb} <b>${number(count)}</b> event${count === 1 ? '' : 's'}`
      : count > maxRows
        ? html`${verb} the first <b>${number(maxRows)}</b> of more than ${number(maxRows)} events`
        : html`${verb} <b>${number(count)}</b> or more events (counting stopped at its time budget;
            at most ${number(maxRows)} change at once)`;
  return html` <p data-testid="confirm-count">${how} (${describe(target)})?</p>
    ${table(
      TYPE_COLUMNS,
      Object.entries(dryRun.countsByType).sort((a, b) => b[1] - a[1]),
      {
        testId: 'confirm-types',
      },
    )}
    <p class="muted">
      ${action === 'replay' ? 'They become due now; the handlers that have not delivered them run again.' : 'They are never replayed again, and are deleted after the retention for discarded events.'}
      ${dryRun.cursor === null ? '' : 'Once these are done, the overview offers to go on with the rest.'}
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
