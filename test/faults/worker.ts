import 'reflect-metadata';
import { DataSource } from 'typeorm';
// The names both releases export: the previous release runs this worker too (mixed-versions).
import { OutboxAdmin, OutboxDispatcher, OutboxHealthIndicator, OutboxPublisher } from '@app/outbox';
import { installBreak } from './support/breaks';
import { reportCrashContext } from './support/crash-context';
import { FaultHandlers } from './support/fault-handlers';
import type { ChildConfig, Command, Notice, Reply, Request, WorkerStatus } from './support/ipc';
import { Producer } from './support/producer';
import { createFaultApp, type FaultApp } from './support/worker-app';

/**
 * A child process of the fault suite: a worker (the outbox dispatcher and the fault handlers) or
 * a producer (emits through OutboxPublisher), per FAULTS_CHILD. It answers the runner's
 * commands over IPC and shuts down on SIGTERM the way a deployment stops a pod.
 */

const startedAt = Date.now();
const config = JSON.parse(process.env.FAULTS_CHILD ?? '{}') as ChildConfig;

/** Resolves once the message is written, so an exit right after cannot swallow it. */
function send(message: Notice | Reply): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || !process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

// Orphaned by a runner that died: nobody will ever stop this process otherwise.
process.on('disconnect', () => process.exit(1));

async function main(): Promise<void> {
  installBreak(config.breakMode);
  const fault = await createFaultApp(config);
  if (config.role === 'worker') reportCrashContext(fault.app, fault.records);
  const producer =
    config.role === 'producer'
      ? new Producer(fault.app.get(DataSource), fault.app.get(OutboxPublisher))
      : undefined;
  process.on('message', (request: Request) => {
    void answer(fault, producer, request.command).then(
      (result) => send({ id: request.id, ok: true, result }),
      (error: unknown) => send({ id: request.id, ok: false, error: String(error) }),
    );
  });
  process.once('SIGTERM', () => void shutdown(fault));
  await send({ notice: 'ready', bootMs: Date.now() - startedAt });
}

async function answer(fault: FaultApp, producer: Producer | undefined, command: Command) {
  switch (command.cmd) {
    case 'status': {
      const dispatcher = fault.app.get(OutboxDispatcher);
      const handlers = fault.app.get(FaultHandlers);
      return {
        inFlight: handlers.inFlight,
        txOpen: handlers.txOpen,
        calls: handlers.calls,
        state: dispatcher.state,
        listener: dispatcher.listenerState,
        lastDrainAt: dispatcher.lastDrainAt?.getTime() ?? null,
        queued: queuedIn(dispatcher),
      } satisfies WorkerStatus;
    }
    case 'health': {
      const result = await fault.app
        .get(OutboxHealthIndicator)
        .isHealthy('outbox', { timeoutMs: 1000 });
      const { status, message, listener, state } = result.outbox as Record<string, unknown>;
      return { status, message, listener, state };
    }
    case 'start-dispatcher':
      return fault.app.get(OutboxDispatcher).start();
    case 'emit':
      return producer!.emit(command.count, command.batch, command.kind, command.slowMs);
    case 'stream-start': {
      const { perSecond, batch, kind, slow, ids } = command;
      return producer!.startStream(perSecond, batch, kind, slow, ids);
    }
    case 'stream-stop':
      return producer!.stopStream();
    case 'keyed-stream-start': {
      const { producers, perSecond, keys, pairShare, flakyShare } = command;
      return producer!.startKeyedStream(producers, perSecond, keys, pairShare, flakyShare);
    }
    case 'emit-keyed':
      return producer!.emitKeyedTransactions(command.producer, command.transactions);
    case 'discard':
      return fault.app
        .get(OutboxAdmin)
        .discard({ ids: command.ids }, { reason: command.reason, actor: 'fault suite' });
    case 'blocked-keys':
      return fault.app.get(OutboxAdmin).blockedKeys();
  }
}

/** The dispatcher's local queue is private; the suite reads its length, nothing else. */
function queuedIn(dispatcher: OutboxDispatcher): number {
  const { producer } = dispatcher as unknown as { producer?: { queue?: { length?: number } } };
  return producer?.queue?.length ?? 0;
}

/** SIGTERM: `app.close()` as Nest's shutdown hooks would run it, timed for the runner. */
async function shutdown(fault: FaultApp): Promise<void> {
  const signalledAt = Date.now();
  void send({ notice: 'shutting-down', at: signalledAt });
  let stopSeen = config.role !== 'worker';
  const watch = setInterval(() => {
    if (stopSeen || fault.app.get(OutboxDispatcher).state !== 'stopped') return;
    stopSeen = true;
    void send({ notice: 'dispatcher-stopped', afterSignalMs: Date.now() - signalledAt });
  }, 5);
  // A close that outlasts the grace says what it still waits for, for the runner's report.
  const overdue = setTimeout(() => {
    const engine = fault.app.get(OutboxDispatcher).state;
    const resources = process.getActiveResourcesInfo().join(', ');
    console.error(`still closing after 10 s: engine ${engine}; active resources: ${resources}`);
  }, 10_000);
  overdue.unref();
  await fault.app.close();
  clearTimeout(overdue);
  clearInterval(watch);
  const closedMs = Date.now() - signalledAt;
  // Stopped between two looks and closed right after: the close time bounds it.
  if (!stopSeen) await send({ notice: 'dispatcher-stopped', afterSignalMs: closedMs });
  // The records pool is not ended: an abandoned handler may still wait on it, and the exit
  // below closes its sockets anyway.
  await send({ notice: 'closed', afterSignalMs: closedMs });
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error('fault child failed to start:', error);
  process.exit(2);
});
