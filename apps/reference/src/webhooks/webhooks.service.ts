import { Injectable, NotFoundException } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { WebhookDeliveryRepository, type DeliveryView } from './webhook-delivery.repository';
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

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 random bytes. */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Endpoint registration and the delivery log. */
@Injectable()
export class WebhooksService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly organizations: OrganizationsQuery,
  ) {}

  async createEndpoint(
    organizationId: string,
    dto: CreateWebhookEndpointDto,
  ): Promise<CreatedWebhookEndpoint> {
    return this.dataSource.transaction(async (manager) => {
      if (!(await this.organizations.exists(organizationId, manager))) {
        throw new NotFoundException(`organization ${organizationId} does not exist`);
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

  listDeliveries(organizationId: string, limit = DEFAULT_LIST_LIMIT): Promise<DeliveryView[]> {
    return this.deliveries.list(organizationId, limit);
  }
}
