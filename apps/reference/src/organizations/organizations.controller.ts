import { Body, Controller, Get, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { RequestId } from '../common/request-id';
import { CreateOrganizationDto, InviteMemberDto } from './organizations.dto';
import { OrganizationsService } from './organizations.service';

@Controller('organizations')
export class OrganizationsController {
  constructor(private readonly organizations: OrganizationsService) {}

  @Post()
  create(@Body() dto: CreateOrganizationDto, @RequestId() requestId: string) {
    return this.organizations.create(dto, requestId);
  }

  @Post(':organizationId/members')
  invite(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Body() dto: InviteMemberDto,
    @RequestId() requestId: string,
  ) {
    return this.organizations.invite(organizationId, dto, requestId);
  }

  @Get(':organizationId/members')
  members(@Param('organizationId', ParseUUIDPipe) organizationId: string) {
    return this.organizations.members(organizationId);
  }
}
