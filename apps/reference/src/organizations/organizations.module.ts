import { Module } from '@nestjs/common';
import { OrganizationsController } from './organizations.controller';
import { OrganizationsQuery } from './organizations.query';
import { OrganizationsService } from './organizations.service';

/**
 * Organizations and members. Other modules never touch its tables: they inject the
 * `OrganizationsQuery` read port it exports, or react to its events.
 */
@Module({
  controllers: [OrganizationsController],
  providers: [OrganizationsService, OrganizationsQuery],
  exports: [OrganizationsQuery],
})
export class OrganizationsModule {}
