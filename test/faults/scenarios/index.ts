import type { Scenario } from '../support/scenario';
import { acrossNats, acrossRabbitMq } from './across-services';
import { failover } from './failover';
import { halfOpenListen } from './half-open-listen';
import { limitsKill } from './limits-kill';
import { lockAndHang } from './lock-and-hang';
import { mixedVersions } from './mixed-versions';
import { ordering } from './ordering';
import { pgRestart } from './pg-restart';
import { poison } from './poison';
import { poolerRestart } from './pooler-restart';
import { rollingDeploy } from './rolling-deploy';
import { sigkill } from './sigkill';
import { sigterm } from './sigterm';
import { terminateBackends } from './terminate-backends';
import { throughput } from './throughput';
import { transactionalKill } from './transactional-kill';

/** In the order they run; `--only <name>` picks some. */
export const SCENARIOS: Scenario[] = [
  sigkill,
  pgRestart,
  terminateBackends,
  halfOpenListen,
  throughput,
  poison,
  sigterm,
  lockAndHang,
  transactionalKill,
  ordering,
  mixedVersions,
  poolerRestart,
  failover,
  rollingDeploy,
  acrossNats,
  acrossRabbitMq,
  limitsKill,
];
