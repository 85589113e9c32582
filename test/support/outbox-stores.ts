import { OutboxLeaseStore, type FailedSettle } from '@app/outbox';
import { OutboxEmitStore } from '@app/outbox/store/emit/emit.store';
import { RetentionStore } from '@app/outbox/store/retention.store';
import { useTestDatabase, type TestDatabaseFixture } from './test-database';

export interface OutboxStoresFixture extends TestDatabaseFixture {
  readonly repo: OutboxLeaseStore;
  readonly emitStore: OutboxEmitStore;
  readonly retention: RetentionStore;
}

/**
 * The file's database (outbox_event emptied before each test) and the outbox's stores on its
 * DataSource, without the module: the repository and the emit store notifying on `channel`
 * (the module's by default). Read the fields inside tests and hooks.
 */
export function useOutboxStores(channel?: string): OutboxStoresFixture {
  const t = useTestDatabase({ truncateEach: ['outbox_event'] });
  let stores: Pick<OutboxStoresFixture, 'repo' | 'emitStore' | 'retention'> | undefined;
  beforeAll(() => {
    const options = channel === undefined ? {} : { channel };
    stores = {
      repo: new OutboxLeaseStore(t.db.dataSource, options),
      emitStore: new OutboxEmitStore(t.db.dataSource, options),
      retention: new RetentionStore(t.db.dataSource),
    };
  });
  const ready = () => {
    if (!stores) throw new Error('useOutboxStores: read before its beforeAll ran');
    return stores;
  };
  return {
    get db() {
      return t.db;
    },
    get sql() {
      return t.sql;
    },
    get repo() {
      return ready().repo;
    },
    get emitStore() {
      return ready().emitStore;
    },
    get retention() {
      return ready().retention;
    },
  };
}

/**
 * A settle of a failed attempt as the engine reports one: `failedHandlers` threw `error` in the
 * attempt the claim returned. Unless given, no handler delivered, none has a failure count or a
 * retry time, and the event is due again at once; whether it becomes dead is always the caller's.
 */
export function failedSettle(
  settle: Pick<FailedSettle, 'id' | 'attempts' | 'failedHandlers' | 'error' | 'dead'> &
    Partial<FailedSettle>,
): FailedSettle {
  return { handlers: [], retryDelayMs: 0, failures: [], pending: [], ...settle };
}
