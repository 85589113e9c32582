import type { INestApplication } from '@nestjs/common';
import { hostname } from 'node:os';
import { OutboxAdmin, OutboxEngine } from '@app/outbox';
import { createOutboxApp, eventually } from './support/outbox-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';

/** Every running instance reports in to `outbox_dispatcher`, and leaves when it stops. */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.close();
});

const worker = (types?: string[]) =>
  createOutboxApp({
    url: db.url,
    outbox: {
      listen: { enabled: false },
      tuning: { pollIntervalMs: 60_000 },
      concurrency: 7,
      types,
    },
  });

it('lists each running instance with its state, and forgets one that stopped', async () => {
  const apps: INestApplication[] = [];
  try {
    apps.push(await worker(), await worker(['invoice.paid']));
    const admin = apps[0].get(OutboxAdmin);
    await eventually('both report in', async () => (await admin.instances()).length === 2);
    const reports = await admin.instances();
    expect(reports).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ types: null }),
        expect.objectContaining({ types: ['invoice.paid'] }),
      ]),
    );
    for (const report of reports) {
      expect(report).toMatchObject({
        host: hostname(),
        pid: process.pid,
        state: 'running',
        listener: 'disabled',
        concurrency: 7,
        inFlight: 0,
        reporting: true,
      });
    }
    expect(new Set(reports.map((r) => r.id)).size).toBe(2);
    // The deprecated name lists the same instances.
    const ids = (list: { id: string }[]) => list.map((r) => r.id).sort();
    expect(ids(await admin.dispatchers())).toEqual(ids(reports));

    await apps.pop()!.close();
    expect((await admin.instances()).map((r) => r.types)).toEqual([null]);

    // A process that died stops reporting: its row stays, marked silent, until a day has passed.
    await db.dataSource.query(`UPDATE outbox_dispatcher SET seen_at = now() - interval '1 minute'`);
    expect(await admin.instances()).toMatchObject([{ reporting: false }]);
    await apps[0].get(OutboxEngine).stop();
    expect(await admin.instances()).toEqual([]);
  } finally {
    for (const app of apps) await app.close();
  }
});
