import type { ModuleRef } from '@nestjs/core';
import { alreadyLoadedPackage } from '../common/optional-package.util';

/** The part of `@nestjs-cls/transactional`'s TransactionHost the outbox relies on. */
export interface AmbientTransactionHost {
  readonly tx: unknown;
  isTransactionActive(): boolean;
  withTransaction<R>(
    propagation: string,
    options: { isolationLevel?: string },
    fn: () => Promise<R>,
  ): Promise<R>;
}

export interface AmbientTransactions {
  host: AmbientTransactionHost;
  /** The library's value of `Propagation.RequiresNew`. */
  requiresNew: string;
}

/**
 * The app's `@nestjs-cls/transactional` TransactionHost, when it has one. The package is
 * optional: without it (or without its module in the app) the outbox uses explicit managers.
 * An app that uses it has loaded it; one that has it installed and unused does not get it
 * loaded (and nestjs-cls's AsyncLocalStorage turned on) by the outbox.
 */
export function findAmbientTransactions(moduleRef: ModuleRef): AmbientTransactions | undefined {
  const found = alreadyLoadedPackage<{
    TransactionHost: unknown;
    Propagation?: { RequiresNew?: string };
  }>('@nestjs-cls/transactional');
  if (!found) return undefined;
  try {
    const host = moduleRef.get<AmbientTransactionHost>(found.TransactionHost as never, {
      strict: false,
    });
    return { host, requiresNew: found.Propagation?.RequiresNew ?? 'REQUIRES_NEW' };
  } catch {
    return undefined;
  }
}
