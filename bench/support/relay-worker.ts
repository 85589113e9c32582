/**
 * A relay in a process of its own, so its CPU and memory can be measured apart from the bench:
 * `node -r ts-node/register/transpile-only bench/support/relay-worker.ts` with
 * BENCH_RELAY_WORKER (JSON, see `RelayWorkerConfig`) and an IPC channel. It boots, says `ready`,
 * and waits for commands: `start` (the engine, or a reference burn-down), `stats`, `runs`,
 * `close`.
 */
import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { OutboxEngine } from '../../libs/outbox/src';
import { createOutboxApp } from './app';
import { handlerHooks } from './handlers';
import type {
  RelayNotice,
  RelayReply,
  RelayRequest,
  RelayRuns,
  RelayStats,
  RelayWorkerConfig,
  RunSpan,
} from './relay-ipc';
import { referenceDrain, referencePool } from './reference-relay';

const bootStarted = Date.now();
const config = JSON.parse(process.env.BENCH_RELAY_WORKER ?? '{}') as RelayWorkerConfig;

let handled = 0;
/** Runs of a handler that reports its end (`handlerHooks.onEnd`): when each started and ended. */
const spans: RunSpan[] = [];
const startedAt = new Map<string, number>();
const runsById = config.progressEvery ? new Map<string, number>() : undefined;

function send(message: RelayNotice | RelayReply): Promise<void> {
  return new Promise((resolve) => {
    if (!process.connected || !process.send) return resolve();
    process.send(message, undefined, undefined, () => resolve());
  });
}

/** One handler run: a counter, and per id only when reruns are being counted. */
function record(id: string): void {
  handled++;
  if (!runsById) return;
  const before = runsById.get(id) ?? 0;
  runsById.set(id, before + 1);
  if (before === 0 && runsById.size % config.progressEvery! === 0) {
    void send({ notice: 'progress', events: runsById.size });
  }
}

function runs(): RelayRuns {
  let total = 0;
  let rerun = 0;
  for (const n of runsById?.values() ?? []) {
    total += n;
    if (n > 1) rerun++;
  }
  return { events: runsById?.size ?? 0, runs: total, rerun };
}

// Orphaned by a bench that died: nobody would ever stop this process otherwise.
process.on('disconnect', () => process.exit(1));

async function main(): Promise<void> {
  let app: INestApplication | undefined;
  let reference: Promise<number> | undefined;
  const pool =
    config.mode === 'reference' ? referencePool(config.url, config.applicationName) : undefined;
  if (config.mode === 'module') {
    handlerHooks.onStart = (event) => {
      record(event.id);
      startedAt.set(event.id, Date.now());
    };
    handlerHooks.onEnd = (event) => {
      spans.push({ start: startedAt.get(event.id) ?? Date.now(), end: Date.now() });
      startedAt.delete(event.id);
    };
    app = await createOutboxApp(config.url, {
      handler: config.handler ?? 'noop',
      autoStart: false,
      outbox: config.outbox,
      applicationName: config.applicationName,
    });
  } else {
    // Open both connections now, so the burn-down does not pay for them.
    await Promise.all([pool!.query('SELECT 1'), pool!.query('SELECT 1')]);
  }

  const answer = async (request: RelayRequest): Promise<unknown> => {
    switch (request.cmd) {
      case 'start':
        if (app) return app.get(OutboxEngine).start();
        reference = referenceDrain(pool!, record);
        return undefined;
      case 'stats': {
        const memory = process.memoryUsage();
        const cpu = process.cpuUsage();
        return {
          rss: memory.rss,
          heapUsed: memory.heapUsed,
          cpuSeconds: (cpu.user + cpu.system) / 1e6,
          handled,
        } satisfies RelayStats;
      }
      case 'runs':
        return runs();
      case 'spans':
        return spans;
      case 'close':
        await app?.close();
        await reference?.catch(() => undefined);
        await pool?.end();
        setImmediate(() => process.exit(0));
        return undefined;
    }
  };
  process.on('message', (request: RelayRequest) => {
    void answer(request).then(
      (result) => send({ id: request.id, ok: true, result }),
      (error: unknown) => send({ id: request.id, ok: false, error: String(error) }),
    );
  });
  await send({ notice: 'ready', bootMs: Date.now() - bootStarted });
}

main().catch(async (error: unknown) => {
  await send({ notice: 'failed', error: error instanceof Error ? error.message : String(error) });
  process.exit(2);
});
