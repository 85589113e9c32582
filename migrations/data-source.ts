import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES } from '@app/outbox';
import { OUTBOX_MIGRATIONS } from './index';

/**
 * The DataSource the typeorm CLI loads (`npm run migration:run`). It reads only DATABASE_URL so
 * the same file serves a laptop, CI and a deploy job; failing here beats the driver's guess of
 * localhost:5432 as the current OS user.
 */
const url = process.env.DATABASE_URL;
if (!url) {
  throw new Error('DATABASE_URL must be set, e.g. postgres://user:pass@host:5432/db');
}

export default new DataSource({
  type: 'postgres',
  url,
  entities: [...OUTBOX_ENTITIES],
  // Classes rather than a glob: no dependence on the CLI's cwd or on .ts vs compiled .js files.
  migrations: OUTBOX_MIGRATIONS,
  // The migrations are the schema's only author.
  synchronize: false,
  migrationsRun: false,
  // TypeORM's default transaction mode, 'all': every migration of a run in one transaction.
});
