import { blockedClaim } from './blocked-claim';
import { inbox, relay } from './brokers';
import { burndown } from './burndown';
import { claimBackoff } from './claim-backoff';
import { cpu } from './cpu';
import { flood } from './flood';
import { health } from './health';
import { heldXmin } from './held-xmin';
import { latency } from './latency';
import { limits } from './limits';
import { mixed } from './mixed';
import { mixedLatency } from './mixed-latency';
import { orderedBurndown } from './ordered-burndown';
import { orderedOneKey } from './ordered-one-key';
import { producer } from './producer';
import { producers } from './producers';
import { rss } from './rss';
import type { Scenario } from './scenario';
import { settleKill } from './settle-kill';
import { stormScenario } from './storm';
import { telemetry } from './telemetry';
import { transactional } from './transactional';

/** Every scenario, in the order a full run takes them. */
export const SCENARIOS: readonly Scenario[] = [
  producer,
  burndown,
  latency,
  heldXmin,
  mixed,
  mixedLatency,
  claimBackoff,
  health,
  rss,
  cpu,
  producers,
  stormScenario,
  settleKill,
  transactional,
  telemetry,
  orderedBurndown,
  orderedOneKey,
  blockedClaim,
  flood,
  limits,
  relay,
  inbox,
];

/** Not a scenario of this file: `bench/scrub-error.bench.ts`, which BENCH_ONLY=scrub selects. */
export const SCRUB = 'scrub';
