// nestjs-lease-outbox/bridge: relays to brokers and inboxes from them. The broker clients are
// optional peers, loaded only when a transport of theirs is created.
export { OutboxBridgeModule, getOutboxRelayToken } from './outbox-bridge.module';
export type { OutboxBridgeOptions } from './outbox-bridge.options';
export type { OutboxRelay } from './relay.handler';
export {
  OutboxInboxModule,
  OutboxInbox,
  getOutboxInboxToken,
  type OutboxInboxOptions,
} from './outbox-inbox.module';
export {
  OutboxBridgeHealthIndicator,
  type OutboxBridgeHealthData,
  type OutboxBridgeHealthResult,
} from './outbox-bridge.health';
export type {
  BrokerConnectionState,
  BrokerConnectionStatus,
  InboxDelivery,
  InboxMapper,
  InboxMessage,
  OutboxInboxTransport,
  OutboxRelayMessage,
  OutboxRelayTransport,
} from './bridge.types';
export type { BrokerConnectionOptions } from './transport-options';
export { RELAY_HEADERS, relayMessage } from './relay-message';
export { INBOX_ID_NAMESPACE, inboxEventId, relayedEvent } from './inbox-event.mapping';
export { natsJetStream, type NatsJetStreamRelayOptions } from './nats/nats-jetstream.relay';
export { natsJetStreamInbox, type NatsJetStreamInboxOptions } from './nats/nats-jetstream.inbox';
export { rabbitMq, type RabbitMqRelayOptions } from './rabbitmq/rabbitmq.relay';
export { rabbitMqInbox, type RabbitMqInboxOptions } from './rabbitmq/rabbitmq.inbox';
export {
  RabbitMqPublishError,
  type RabbitMqPublishFailure,
} from './rabbitmq/rabbitmq-publish.error';
