// nestjs-lease-outbox/admin: the operator's pages. `OutboxAdmin` itself is on the root entry, so
// that an app can replay and discard in code without loading the dashboard.
export { OutboxDashboardModule } from './dashboard/dashboard.module';
export type { OutboxDashboardOptions } from './dashboard/dashboard.options';
export { InvalidOutboxDashboardOptionsError } from '../outbox.errors';
