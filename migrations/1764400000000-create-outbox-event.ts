/**
 * The outbox table's migration ships with the library (so apps get it from the package); this
 * file keeps it in the repository's migration list.
 */
export { CreateOutboxEvent1764400000000 } from '@app/outbox';
