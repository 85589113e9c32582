import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS } from '../../libs/outbox/src/migrations';

/**
 * What an app's data source file for the TypeORM CLI (`typeorm migration:run -d …`) holds at its
 * simplest: the outbox's migrations, and TypeORM's defaults for everything else (its
 * `migrationsTransactionMode` is 'all').
 */
export default new DataSource({
  type: 'postgres',
  url: process.env.DATABASE_URL,
  migrations: OUTBOX_MIGRATIONS,
  logging: false,
});
