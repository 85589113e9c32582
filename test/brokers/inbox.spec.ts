import { inboxConformance } from './conformance/inbox.conformance';
import { BROKER_DRIVERS } from './support/drivers';

// The inbox suite, once per transport: each broker started, used and removed in turn.
describe.each(BROKER_DRIVERS)('inbox from $name', inboxConformance);
