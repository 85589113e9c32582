import { CreateOutboxEvent1764400000000 } from './1764400000000-create-outbox-event';

/** Every outbox migration, in order, for DataSource `migrations` options and test templates. */
export const OUTBOX_MIGRATIONS = [CreateOutboxEvent1764400000000];

export { CreateOutboxEvent1764400000000 };
