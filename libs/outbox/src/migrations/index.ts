import { CreateOutboxEvent1764400000000 } from './1764400000000-create-outbox-event';

/** The outbox's migrations, in order: add them to your DataSource's `migrations`. */
export const OUTBOX_MIGRATIONS = [CreateOutboxEvent1764400000000];
