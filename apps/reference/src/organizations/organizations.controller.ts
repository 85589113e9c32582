import { Body, Controller, Get, Param, ParseUUIDPipe, Post, UseGuards } from '@nestjs/common';
import { OperatorGuard } from '../auth/operator.guard';
import { OrganizationKeyGuard } from '../auth/organization-key.guard';
import { RequestId } from '../common/request-id';
import { CreateOrganizationDto, InviteMemberDto } from './organizations.dto';
import { OrganizationsService } from './organizations.service';

@Controller('organizations')
export class OrganizationsController {
  constructor(private readonly organizations: OrganizationsService) {}

  /** Operators create organizations; the answer holds the new organization's API key, once. */
  @Post()
  @UseGuards(OperatorGuard)
  create(@Body() dto: CreateOrganizationDto, @RequestId() requestId: string) {
    return this.organizations.create(dto, requestId);
  }

  /** A new API key for the organization (the old one stops working); shown once, here. */
  @Post(':organizationId/api-key')
  @UseGuards(OperatorGuard)
  issueApiKey(@Param('organizationId', ParseUUIDPipe) organizationId: string) {
    return this.organizations.issueApiKey(organizationId);
  }

  @Post(':organizationId/members')
  @UseGuards(OrganizationKeyGuard)
  invite(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Body() dto: InviteMemberDto,
    @RequestId() requestId: string,
  ) {
    return this.organizations.invite(organizationId, dto, requestId);
  }

  @Get(':organizationId/members')
  @UseGuards(OrganizationKeyGuard)
  members(@Param('organizationId', ParseUUIDPipe) organizationId: string) {
    return this.organizations.members(organizationId);
  }
}
