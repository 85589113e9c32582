import {
  BadRequestException,
  ConflictException,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { OutboxAdmin } from '@app/outbox';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { InternalDestinationError } from './destination-address';
import { WebhookDeliveriesQuery, type DeliveryView } from './webhook-deliveries.query';
import { WebhookDestinations } from './webhook-destinations';
import { WebhookEndpoint } from './webhook-endpoint.entity';
import type { CreateWebhookEndpointDto } from './webhooks.dto';

export interface CreatedWebhookEndpoint {
  id: string;
  url: string;
  events: string[];
  /** Shown once, here; the receiver verifies signatures with it. */
  secret: string;
}

const DEFAULT_LIST_LIMIT = 100;

/** Endpoints one organization may have, enabled or not: each event is one POST per endpoint. */
export const MAX_ENDPOINTS_PER_ORGANIZATION = 10;

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 random bytes. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Endpoint registration, the delivery log and the replay of dead deliveries. */
@Injectable()
export class WebhooksService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly deliveries: WebhookDeliveriesQuery,
    private readonly organizations: OrganizationsQuery,
    private readonly outbox: OutboxAdmin,
    private readonly destinations: WebhookDestinations,
  ) {}

  /**
   * Registers an endpoint at a public address (a 400 naming `url` otherwise), within the
   * organization's MAX_ENDPOINTS_PER_ORGANIZATION (a 409 beyond).
   */
  async createEndpoint(
    organizationId: string,
    dto: CreateWebhookEndpointDto,
  ): Promise<CreatedWebhookEndpoint> {
    await this.checkDestination(dto.url);
    return this.dataSource.transaction(async (manager) => {
      if (!(await this.organizations.exists(organizationId, manager))) {
        throw new NotFoundException(`organization ${organizationId} does not exist`);
      }
      // One registration at a time per organization, so two cannot both pass the count.
      await manager.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
        `webhook_endpoint:${organizationId}`,
      ]);
      const [{ n }] = await manager.query<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM webhook_endpoint WHERE organization_id = $1`,
        [organizationId],
      );
      if (n >= MAX_ENDPOINTS_PER_ORGANIZATION) {
        throw new ConflictException(
          `the organization has ${n} webhook endpoints, the most it may have`,
        );
      }
      const endpoint: WebhookEndpoint = manager.create(WebhookEndpoint, {
        id: randomUUID(),
        organizationId,
        url: dto.url,
        secret: generateWebhookSecret(),
        eventTypes: [...dto.events],
        enabled: true,
      });
      await manager.insert(WebhookEndpoint, endpoint);
      return {
        id: endpoint.id,
        url: endpoint.url,
        events: endpoint.eventTypes,
        secret: endpoint.secret,
      };
    });
  }

  /** A 400 naming `url` when its host is, or resolves to, an address inside. */
  private async checkDestination(url: string): Promise<void> {
    try {
      await this.destinations.check(new URL(url).hostname);
    } catch (error) {
      if (error instanceof InternalDestinationError) {
        throw new BadRequestException([`url must be a public address: ${error.message}`]);
      }
      const code = (error as { code?: unknown }).code;
      throw new BadRequestException([
        `url host does not resolve${typeof code === 'string' ? ` (${code})` : ''}`,
      ]);
    }
  }

  /**
   * Enables or disables an endpoint. A disabled endpoint gets no new delivery; one already on
   * its way fails its tries until the endpoint is enabled again or its schedule runs out.
   */
  async setEnabled(
    organizationId: string,
    endpointId: string,
    enabled: boolean,
  ): Promise<{ id: string; enabled: boolean }> {
    const result = await this.dataSource
      .getRepository(WebhookEndpoint)
      .update({ id: endpointId, organizationId }, { enabled });
    if (!result.affected) {
      throw new NotFoundException(`webhook endpoint ${endpointId} does not exist`);
    }
    return { id: endpointId, enabled };
  }

  listDeliveries(organizationId: string, limit = DEFAULT_LIST_LIMIT): Promise<DeliveryView[]> {
    return this.deliveries.list(organizationId, limit);
  }

  /** Makes a dead delivery due now: the sender tries it once more, at once. */
  async replay(organizationId: string, deliveryId: string): Promise<DeliveryView> {
    const delivery = await this.deliveries.find(organizationId, deliveryId);
    if (!delivery) throw new NotFoundException(`webhook delivery ${deliveryId} does not exist`);
    if (delivery.status !== 'dead') {
      throw new ConflictException(`webhook delivery ${deliveryId} is ${delivery.status}, not dead`);
    }
    const replayed = await this.outbox.replay({ ids: [deliveryId] }, { actor: 'webhooks-api' });
    if (replayed.ids.length === 0) {
      throw new ConflictException(`webhook delivery ${deliveryId} is being replayed already`);
    }
    return (await this.deliveries.find(organizationId, deliveryId)) ?? delivery;
  }
}
