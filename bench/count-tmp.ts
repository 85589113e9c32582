import 'reflect-metadata';
import { Client } from 'pg';
import { OutboxDispatcher } from '../libs/outbox/src';
import { createOutboxApp } from './support/app';
import { insertEvents, startServer, waitUntilSettled, withFreshDatabase } from './support/database';
const counts = new Map<string, number>();
const orig = Client.prototype.query;
(Client.prototype as any).query = function (this: any, text: any, ...rest: any[]) {
  const t = typeof text === 'string' ? text : text?.text ?? 'cfg';
  const m = /WITH (\w+)|INSERT INTO \w+|UPDATE \w+|SELECT \w+|LISTEN|DELETE/.exec(t);
  const k = (m ? m[0] : t.slice(0, 40)).replace(/\s+/g, ' ');
  counts.set(k, (counts.get(k) ?? 0) + 1);
  return (orig as any).call(this, text, ...rest);
};
async function main() {
  const server = await startServer();
  await withFreshDatabase(server, 'count', async (db) => {
    await insertEvents(db.sql, 20000);
    await db.sql.query('VACUUM ANALYZE outbox_event');
    const app = await createOutboxApp(db.url, { handler: 'noop', autoStart: false });
    counts.clear();
    await app.get(OutboxDispatcher).start();
    await waitUntilSettled(db.sql, 120000);
    console.log([...counts].sort((a, b) => b[1] - a[1]));
    await app.close();
  });
  await server.stop();
}
main();
