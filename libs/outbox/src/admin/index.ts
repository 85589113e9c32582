// nestjs-lease-outbox/admin: the operator's tools. `OutboxAdmin` itself is on the root entry, so
// that an app can replay and discard in code without loading the dashboard or the command.
export { OutboxDashboardModule } from './dashboard/dashboard.module';
export type { OutboxDashboardOptions } from './dashboard/dashboard.options';
export { InvalidOutboxDashboardOptionsError } from '../outbox.errors';
// The program of `npx nestjs-lease-outbox`, for a team that runs it from its own tooling.
export { runCli as runOutboxCli, type CliIo as OutboxCliIo } from './cli/cli.program';
export {
  EXIT as OUTBOX_CLI_EXIT,
  type ExitCode as OutboxCliExitCode,
} from './cli/exit-codes.constants';
