import { relayConformance } from './conformance/relay.conformance';
import { BROKER_DRIVERS } from './support/drivers';

// The relay suite, once per transport: each broker started, used and removed in turn.
describe.each(BROKER_DRIVERS)('relay to $name', relayConformance);
