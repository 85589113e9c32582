import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import request from 'supertest';
import { OutboxAdmin } from '@app/outbox';
import { findChromium } from '../support/chromium';
import { eventually } from '../support/outbox-app';
import { createReferenceApp, OPERATOR_TOKEN } from '../support/reference-app';
import { createTenant } from '../support/tenant';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { WebhookReceiver } from '../support/webhook-receiver';
import { plantSecret } from '../support/log-guard';

/**
 * The dashboard in a real browser: Chromium (driven by playwright-core; which Chromium, see
 * support/chromium.ts) loads the reference app's /outbox/ui on a real PostgreSQL, sees a webhook
 * die while its receiver is down, replays it from the page once the receiver is back, and sees it
 * delivered. Every table is read as laid out: each header aligned with the cells under it,
 * numbers on the right.
 */

/** One column of a table as the browser lays it out: header, cells, computed `text-align`. */
interface Column {
  header: string;
  align: string;
  cells: { text: string; align: string }[];
}

/** The columns of `table`: each header cell with the cell under it in every body row. */
async function columnsOf(table: Locator): Promise<Column[]> {
  return table.evaluate((element) => {
    const style = (cell: unknown) => element.ownerDocument.defaultView!.getComputedStyle(cell);
    const text = (cell: { textContent: string | null } | undefined) =>
      (cell?.textContent ?? '').trim().replace(/\s+/g, ' ');
    const rows = [...element.querySelectorAll('tbody > tr')];
    return [...element.querySelectorAll('thead th')].map((th, i) => ({
      header: text(th),
      align: style(th).textAlign,
      cells: rows.map((row) => ({
        text: text(row.children[i]),
        align: row.children[i] ? style(row.children[i]).textAlign : 'missing',
      })),
    }));
  });
}

/**
 * Every cell sits as its header does, and the `numeric` columns (named by header) sit on the
 * right, header and cells: a count read under the wrong header is a wrong count.
 */
function expectAligned(columns: Column[], numeric: string[]): void {
  expect(columns.map((c) => c.header)).toEqual(expect.arrayContaining(numeric));
  expect(columns.some((c) => c.cells.length > 0)).toBe(true);
  const misaligned = columns.flatMap((column) =>
    column.cells
      .filter((cell) => cell.align !== column.align)
      .map((cell) => `${column.header} (${column.align}): "${cell.text}" (${cell.align})`),
  );
  expect(misaligned).toEqual([]);
  const alignOf = (column: Column) => ({
    header: column.align,
    cells: [...new Set(column.cells.map((cell) => cell.align))],
  });
  expect(
    Object.fromEntries(
      columns.filter((c) => numeric.includes(c.header)).map((c) => [c.header, alignOf(c)]),
    ),
  ).toEqual(
    Object.fromEntries(numeric.map((name) => [name, { header: 'right', cells: ['right'] }])),
  );
}

/** The cell of `column` in the row whose `key` column reads `value`. */
function cellOf(columns: Column[], key: string, value: string, column: string): string {
  const keys = columns.find((c) => c.header === key);
  const wanted = columns.find((c) => c.header === column);
  if (!keys || !wanted) throw new Error(`no column ${key} or ${column}`);
  const row = keys.cells.findIndex((cell) => cell.text === value);
  if (row < 0) throw new Error(`no row with ${key} ${value}`);
  return wanted.cells[row].text;
}

/** The overview's "Undelivered by type" table. */
const backlogTable = (on: Page) =>
  on.locator('h2', { hasText: 'Undelivered by type' }).locator('xpath=following-sibling::table[1]');

/** Screenshots of the run, kept for a look after it (git-ignored). */
const SHOTS = join(__dirname, '../../.data/screenshots');

let db: TestDatabase;
let receiver: WebhookReceiver;
let app: INestApplication;
let browser: Browser;
let page: Page;
let base: string;

beforeAll(async () => {
  db = await createTestDatabase();
  receiver = await WebhookReceiver.start();
  // The real engine: two retries 50 ms apart, then the webhook is dead.
  app = await createReferenceApp(db.url, {
    WEBHOOK_RETRY_SCHEDULE_MS: '50,50',
    // The receiver listens on 127.0.0.1.
    WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1',
  });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  browser = await chromium.launch({
    ...(await findChromium()),
    // Root in CI containers: Chromium's sandbox needs user namespaces it may not have there.
    args: ['--no-sandbox'],
    timeout: 30_000,
  });
  page = await browser.newPage();
  page.setDefaultTimeout(15_000);
  mkdirSync(SHOTS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await app?.close();
  await receiver?.close();
  await db?.close();
});

it('asks for the operator token, and signs in with it only', async () => {
  // Without a session the page is refused, and says where to sign in.
  const refused = await page.goto(`${base}/outbox/ui`);
  expect(refused?.status()).toBe(401);
  expect(await page.content()).toContain('/outbox/ui/login');

  await page.goto(`${base}/outbox/ui/login`);
  await page.getByLabel('Operator token').fill('not-the-operator-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('sign-in-failed').waitFor();
  expect(await page.context().cookies()).toEqual([]);

  await page.getByLabel('Operator token').fill(OPERATOR_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}/outbox/ui`);
  const [cookie] = await page.context().cookies();
  expect(cookie).toMatchObject({ name: 'outbox_session', httpOnly: true, sameSite: 'Strict' });
  expect(cookie.value).not.toContain(OPERATOR_TOKEN);
});

it('shows a dead webhook, replays it from the page after a confirmation, and shows it delivered', async () => {
  await page.goto(`${base}/outbox/ui`);
  await page.getByTestId('no-dead-letters').waitFor();
  // The app's own instance reports in.
  expect(await page.getByTestId('instances').innerText()).toMatch(/running\s+listening/);

  // An organization with a webhook endpoint, whose receiver fails every try of the next event.
  const http = request(app.getHttpServer());
  const org = await createTenant(app.getHttpServer(), 'Acme');
  const endpoint = await http
    .post(`/organizations/${org.id}/webhooks`)
    .set(org.auth)
    .send({ url: receiver.url('/hooks/acme'), events: ['member.invited'] })
    .expect(201);
  receiver.trust('/hooks/acme', plantSecret(endpoint.body.secret));
  receiver.failNext(3);
  await http
    .post(`/organizations/${org.id}/members`)
    .set(org.auth)
    .send({ email: 'ana@acme.test', role: 'member' })
    .expect(201);
  const admin = app.get(OutboxAdmin);
  await eventually(
    'the webhook delivery is dead',
    async () => (await admin.list({ types: ['webhook.delivery'] })).items.length === 1,
  );
  const [dead] = (await admin.list({ types: ['webhook.delivery'] })).items;

  // It appears on the page: one group, with the handler and the error.
  await page.reload();
  const row = page.getByTestId('groups').locator('tr', { hasText: 'webhook.delivery' });
  await row.waitFor();
  expect(await row.innerText()).toContain('webhook-sender');
  expect(await page.getByTestId('count-dead').innerText()).toMatch(/^1\s*dead$/);
  expectAligned(await columnsOf(page.getByTestId('groups')), ['count']);
  await page.screenshot({ path: join(SHOTS, 'dashboard-dead.png'), fullPage: true });

  // The list of dead letters lines up its attempts too.
  await page.goto(`${base}/outbox/ui/dead`);
  const list = await columnsOf(page.getByTestId('dead-letters'));
  expectAligned(list, ['attempts']);
  expect(cellOf(list, 'id', dead.id, 'attempts')).toBe('3');
  await page.goto(`${base}/outbox/ui`);
  await row.waitFor();

  // Replay: the confirmation page shows the dry run, and nothing has changed yet.
  await row.getByRole('button', { name: 'Replay' }).click();
  expect(await page.getByTestId('confirm-count').innerText()).toMatch(/^Replay 1 event \(/);
  expect((await admin.show(dead.id))!.nextAttemptAt!.getTime()).toBeGreaterThan(Date.now());
  await page.screenshot({ path: join(SHOTS, 'dashboard-confirm.png'), fullPage: true });
  await page.getByRole('button', { name: 'Confirm replay' }).click();
  await page.getByRole('status').waitFor();
  expect(await page.getByRole('status').innerText()).toBe('Replayed 1 events.');

  // The receiver answers now: the replay delivers it, and the page says so.
  await eventually('the replayed webhook is delivered', async () =>
    Boolean((await admin.show(dead.id))?.dispatchedAt),
  );
  expect(receiver.requestsTo('/hooks/acme')).toHaveLength(4);
  await page.goto(`${base}/outbox/ui`);
  await page.getByTestId('no-dead-letters').waitFor();
  await page.goto(`${base}/outbox/ui/events/${dead.id}`);
  expect(await page.getByTestId('event-state').innerText()).toBe('delivered');
  await page.screenshot({ path: join(SHOTS, 'dashboard-event.png'), fullPage: true });
});

it('lines every number up with its header: webhooks waiting for a retry read as retrying', async () => {
  // The reference app again, now resting ten minutes after a failed try: a webhook whose first
  // try failed stays retrying while the page is read.
  await app.close();
  app = await createReferenceApp(db.url, {
    WEBHOOK_RETRY_SCHEDULE_MS: '600000',
    WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1',
  });
  await app.listen(0, '127.0.0.1');
  base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;

  const http = request(app.getHttpServer());
  const org = await createTenant(app.getHttpServer(), 'Globex');
  const endpoint = await http
    .post(`/organizations/${org.id}/webhooks`)
    .set(org.auth)
    .send({ url: receiver.url('/hooks/globex'), events: ['member.invited'] })
    .expect(201);
  receiver.trust('/hooks/globex', plantSecret(endpoint.body.secret));
  receiver.failNext(3);
  for (const email of ['bo@globex.test', 'cy@globex.test', 'di@globex.test']) {
    await http
      .post(`/organizations/${org.id}/members`)
      .set(org.auth)
      .send({ email, role: 'member' })
      .expect(201);
  }
  const admin = app.get(OutboxAdmin);
  await eventually('three webhook deliveries wait for a retry', async () => {
    const { byType } = await admin.status();
    const webhooks = byType.find((t) => t.type === 'webhook.delivery');
    return webhooks?.retrying === 3 && webhooks.due === 0 && webhooks.inFlight === 0;
  });

  // Each count sits under its own header: the three read as retrying, none as in flight.
  await page.goto(`${base}/outbox/ui`);
  const backlog = await columnsOf(backlogTable(page));
  expectAligned(backlog, ['due', 'retrying', 'in flight', 'dead', 'discarded', 'lag']);
  expect(cellOf(backlog, 'type', 'webhook.delivery', 'retrying')).toBe('3');
  expect(cellOf(backlog, 'type', 'webhook.delivery', 'in flight')).toBe('0');
  expectAligned(await columnsOf(page.getByTestId('instances')), ['pid', 'in flight']);
  await page.screenshot({ path: join(SHOTS, 'dashboard-retrying.png'), fullPage: true });
});
