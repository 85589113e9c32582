import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource, type EntityManager } from 'typeorm';
import { conflictOnUniqueViolation } from '../common/unique-violation';
import { DomainEvents } from '../events/domain-events';
import { generateApiKey, hashApiKey } from './api-keys';
import { Member } from './member.entity';
import { Organization } from './organization.entity';
import type { CreateOrganizationDto, InviteMemberDto } from './organizations.dto';

/** Organizations and their members; every change emits its event in the same transaction. */
@Injectable()
export class OrganizationsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly events: DomainEvents,
  ) {}

  /** Creates the organization and its admin; the answer holds its API key, shown only there. */
  create(dto: CreateOrganizationDto, requestId: string) {
    return this.dataSource.transaction(async (manager) => {
      const id = randomUUID();
      const apiKey = generateApiKey(id);
      const organization = await manager.save(Organization, {
        id,
        name: dto.name,
        apiKeyHash: hashApiKey(apiKey),
      });
      const admin = await manager.save(Member, {
        id: randomUUID(),
        organizationId: organization.id,
        email: dto.adminEmail.toLowerCase(),
        role: 'admin' as const,
      });
      const eventId = await this.events.emit(manager, {
        type: 'organization.created',
        aggregateType: 'organization',
        aggregateId: organization.id,
        organizationId: organization.id,
        requestId,
        payload: { organizationId: organization.id, name: organization.name },
      });
      return { id: organization.id, name: organization.name, adminId: admin.id, eventId, apiKey };
    });
  }

  /** A new API key for the organization; the one it had stops working at once. */
  async issueApiKey(organizationId: string): Promise<{ id: string; apiKey: string }> {
    const apiKey = generateApiKey(organizationId);
    const result = await this.dataSource
      .getRepository(Organization)
      .update({ id: organizationId }, { apiKeyHash: hashApiKey(apiKey) });
    if (!result.affected)
      throw new NotFoundException(`organization ${organizationId} does not exist`);
    return { id: organizationId, apiKey };
  }

  invite(organizationId: string, dto: InviteMemberDto, requestId: string) {
    const email = dto.email.toLowerCase();
    return this.dataSource
      .transaction(async (manager) => {
        await this.requireOrganization(manager, organizationId);
        if (await manager.existsBy(Member, { organizationId, email })) {
          throw new ConflictException(`${email} is already a member`);
        }
        const member = await manager.save(Member, {
          id: randomUUID(),
          organizationId,
          email,
          role: dto.role,
        });
        const eventId = await this.events.emit(manager, {
          type: 'member.invited',
          aggregateType: 'member',
          aggregateId: member.id,
          organizationId,
          requestId,
          payload: { memberId: member.id, email, role: member.role },
        });
        return { id: member.id, email, role: member.role, eventId };
      })
      .catch(conflictOnUniqueViolation(`${email} is already a member`));
  }

  members(organizationId: string) {
    return this.dataSource.getRepository(Member).find({
      where: { organizationId },
      order: { createdAt: 'ASC' },
    });
  }

  async requireOrganization(manager: EntityManager, id: string): Promise<Organization> {
    const organization = await manager.findOneBy(Organization, { id });
    if (!organization) throw new NotFoundException(`organization ${id} does not exist`);
    return organization;
  }
}
