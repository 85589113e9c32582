/**
 * Public names that changed, kept as aliases of the new ones for one minor version (see the
 * CHANGELOG). Each is the same class (or type) as its new name, so `app.get(OutboxDispatcher)`
 * and `instanceof` keep working.
 */
import { OutboxEngine, type OutboxEngineState } from './engine/outbox.engine';
import { OutboxLeaseStore, type OutboxLeaseStoreOptions } from './store/lease/lease.store';
import type { OutboxInstanceInfo } from './store/admin/status.types';

/** @deprecated Renamed `OutboxEngine`: the engine of this instance (claim, run, settle). */
export const OutboxDispatcher = OutboxEngine;
/** @deprecated Renamed `OutboxEngine`. */
export type OutboxDispatcher = OutboxEngine;
/** @deprecated Renamed `OutboxEngineState`. */
export type OutboxDispatcherState = OutboxEngineState;

/**
 * @deprecated Renamed `OutboxInstanceInfo`: a running instance of the engine, as
 * `OutboxAdmin.instances()` lists it.
 */
export type DispatcherInfo = OutboxInstanceInfo;

/** @deprecated Renamed `OutboxLeaseStore`: the statements the engine claims and settles with. */
export const OutboxRepository = OutboxLeaseStore;
/** @deprecated Renamed `OutboxLeaseStore`. */
export type OutboxRepository = OutboxLeaseStore;
/** @deprecated Renamed `OutboxLeaseStoreOptions`. */
export type OutboxRepositoryOptions = OutboxLeaseStoreOptions;
