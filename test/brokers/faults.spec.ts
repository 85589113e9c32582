import { faultsConformance } from './conformance/faults.conformance';
import { BROKER_DRIVERS } from './support/drivers';

// The fault suite, once per transport: each broker started, broken and removed in turn.
describe.each(BROKER_DRIVERS)('relay to $name through faults', faultsConformance);
