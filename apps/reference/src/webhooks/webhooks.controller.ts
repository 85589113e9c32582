import { Body, Controller, Get, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { CreateWebhookEndpointDto, ListDeliveriesQuery } from './webhooks.dto';
import { WebhooksService } from './webhooks.service';

@Controller()
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  /** Registers an endpoint; the response is the only place its secret is ever shown. */
  @Post('organizations/:organizationId/webhooks')
  create(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Body() dto: CreateWebhookEndpointDto,
  ) {
    return this.webhooks.createEndpoint(organizationId, dto);
  }

  /** The organization's deliveries, newest first, with their state; no bodies, no secrets. */
  @Get('webhooks/deliveries')
  deliveries(@Query() query: ListDeliveriesQuery) {
    return this.webhooks.listDeliveries(query.organizationId, query.limit);
  }
}
