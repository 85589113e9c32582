import { html, type Html } from './html.util';

/** Which dead letters an action is about: a group, or one event. */
export interface ActionTarget {
  type?: string;
  handler?: string;
  fingerprint?: string;
  id?: string;
  /** Where a change by filter goes on: the cursor of the one before, which stopped short. */
  cursor?: string;
}

/** The target as hidden fields of a form. */
export function hidden(target: ActionTarget): Html {
  const fields = Object.entries(target as Record<string, string | undefined>).filter(
    (entry): entry is [string, string] => entry[1] !== undefined,
  );
  return html`${fields.map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`,
  )}`;
}

/** Replay and discard buttons: each leads to a confirmation page first. */
export function actions(base: string, target: ActionTarget): Html {
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

/** The target in words: one event, or what a group or filter selects. */
export function describe(target: ActionTarget): string {
  if (target.id) return `event ${target.id}`;
  const parts = [
    target.type && `type ${target.type}`,
    target.handler && `handler ${target.handler}`,
    target.fingerprint && `error kind ${target.fingerprint.slice(0, 8)}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(', ') : 'every dead letter';
}

/** Goes on with a change that stopped short: its confirmation page first, for the rest. */
export function goOn(base: string, action: 'replay' | 'discard', target: ActionTarget): Html {
  return html`<form class="inline" method="post" action="${base}/confirm">
    ${hidden(target)}<input type="hidden" name="action" value="${action}" /><button
      type="submit"
      data-testid="go-on"
    >
      Go on: ${action} the rest
    </button>
  </form>`;
}
