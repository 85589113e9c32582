import type { BrokerDriver } from './broker-driver';
import { natsDriver } from './nats-driver';
import { rabbitMqDriver } from './rabbitmq-driver';

/** Every transport the conformance suites run against, each spec over all of them. */
export const BROKER_DRIVERS: readonly BrokerDriver[] = [natsDriver, rabbitMqDriver];
