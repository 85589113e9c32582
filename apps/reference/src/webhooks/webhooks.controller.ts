import {
  Body,
  Controller,
  Get,
  HttpCode,
  Param,
  ParseUUIDPipe,
  Patch,
  Post,
  Query,
} from '@nestjs/common';
import {
  CreateWebhookEndpointDto,
  DeliveryOfOrganizationQuery,
  ListDeliveriesQuery,
  UpdateWebhookEndpointDto,
} from './webhooks.dto';
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

  /** Enables or disables an endpoint (`{ enabled }`). */
  @Patch('organizations/:organizationId/webhooks/:endpointId')
  update(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Param('endpointId', ParseUUIDPipe) endpointId: string,
    @Body() dto: UpdateWebhookEndpointDto,
  ) {
    return this.webhooks.setEnabled(organizationId, endpointId, dto.enabled);
  }

  /** The organization's deliveries, newest first, with their state; no bodies, no secrets. */
  @Get('webhooks/deliveries')
  deliveries(@Query() query: ListDeliveriesQuery) {
    return this.webhooks.listDeliveries(query.organizationId, query.limit);
  }

  /** Sends a dead delivery once more, now. */
  @Post('webhooks/deliveries/:deliveryId/replay')
  @HttpCode(202)
  replay(
    @Param('deliveryId', ParseUUIDPipe) deliveryId: string,
    @Query() query: DeliveryOfOrganizationQuery,
  ) {
    return this.webhooks.replay(query.organizationId, deliveryId);
  }
}
