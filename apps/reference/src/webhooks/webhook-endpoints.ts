import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { WebhookEndpoint } from './webhook-endpoint.entity';

/** Reads of the webhook module's endpoint table, for the fan-out and the sender. */
@Injectable()
export class WebhookEndpoints {
  constructor(private readonly dataSource: DataSource) {}

  /** Enabled endpoints of the organization subscribed to `eventType`, oldest first. */
  subscribed(
    manager: EntityManager,
    organizationId: string,
    eventType: string,
  ): Promise<Array<{ id: string }>> {
    return manager.query(
      `SELECT id FROM webhook_endpoint
       WHERE organization_id = $1 AND enabled AND $2::text = ANY (event_types)
       ORDER BY created_at, id`,
      [organizationId, eventType],
    );
  }

  find(id: string): Promise<WebhookEndpoint | null> {
    return this.dataSource.getRepository(WebhookEndpoint).findOneBy({ id });
  }
}
