import type { DeadLetterChange } from '../../store/admin/dead-letter.types';
import { decodeIdCursor } from '../../store/admin/keyset-cursor.util';
import { CHANGE_CURSOR } from '../change-bounds.util';
import type { ActionTarget } from './actions.view';
import { query } from './query.util';

/** What the overview says after a change, and the change to go on with when it stopped short. */
export interface ChangeNotice {
  text: string;
  goOn?: { action: 'replay' | 'discard'; target: ActionTarget };
}

type Form = Record<string, string | undefined>;

/**
 * What the overview says after a change: one of the dashboard's own sentences, chosen by code,
 * with a count. A link can only pick among them: no text of the caller's is ever shown.
 */
const NOTICES: Readonly<Record<string, (count: number) => string>> = {
  replayed: (count) => `Replayed ${count} events.`,
  discarded: (count) => `Discarded ${count} events.`,
};

const ACTIONS = { replayed: 'replay', discarded: 'discard' } as const;

/** The overview's URL query after `change`: its notice, and where to go on when it stopped. */
export function noticeQuery(
  action: 'replay' | 'discard',
  target: ActionTarget,
  change: DeadLetterChange,
): string {
  const notice = action === 'replay' ? 'replayed' : 'discarded';
  const count = String(change.count);
  if (!change.cursor) return query({ notice, count });
  const { type, handler, fingerprint } = target;
  return query({ notice, count, type, handler, fingerprint, cursor: change.cursor });
}

/**
 * The notice a query names, or none for anything else. With a change's cursor, the target it
 * stopped on comes back as the fields of a form that goes on (through the confirmation page):
 * values, escaped, never text on the page.
 */
export function noticeOf(form: Form): ChangeNotice | undefined {
  const { notice, count, cursor } = form;
  if (typeof notice !== 'string' || !Object.hasOwn(NOTICES, notice)) return undefined;
  if (typeof count !== 'string' || !/^\d{1,9}$/.test(count)) return undefined;
  const text = NOTICES[notice](Number(count));
  if (typeof cursor !== 'string' || decodeIdCursor(CHANGE_CURSOR, cursor) === null) {
    return { text };
  }
  const field = (name: string) =>
    typeof form[name] === 'string' && form[name] !== '' ? form[name] : undefined;
  return {
    text: `${text} More may remain: it stopped at its bound.`,
    goOn: {
      action: ACTIONS[notice as keyof typeof ACTIONS],
      target: {
        type: field('type'),
        handler: field('handler'),
        fingerprint: field('fingerprint'),
        cursor,
      },
    },
  };
}
