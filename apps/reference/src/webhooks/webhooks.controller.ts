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
  UseGuards,
} from '@nestjs/common';
import { CurrentOrganization } from '../auth/current-organization';
import { OrganizationKeyGuard } from '../auth/organization-key.guard';
import {
  CreateWebhookEndpointDto,
  ListDeliveriesQuery,
  UpdateWebhookEndpointDto,
} from './webhooks.dto';
import { WebhooksService } from './webhooks.service';

/** An organization's webhook endpoints and deliveries, with its API key. */
@Controller()
@UseGuards(OrganizationKeyGuard)
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
  deliveries(@CurrentOrganization() organizationId: string, @Query() query: ListDeliveriesQuery) {
    return this.webhooks.listDeliveries(organizationId, query.limit);
  }

  /** Sends a dead delivery of the organization once more, now. */
  @Post('webhooks/deliveries/:deliveryId/replay')
  @HttpCode(202)
  replay(
    @CurrentOrganization() organizationId: string,
    @Param('deliveryId', ParseUUIDPipe) deliveryId: string,
  ) {
    return this.webhooks.replay(organizationId, deliveryId);
  }
}
