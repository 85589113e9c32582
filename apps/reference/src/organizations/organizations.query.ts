import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { keyMatches, organizationNamedBy } from './api-keys';
import type { MemberRole } from './member.entity';
import { Organization } from './organization.entity';

/** A member as other modules see one. */
export interface MemberView {
  id: string;
  email: string;
  role: MemberRole;
}

/**
 * The organizations module's read port: what other modules may ask of its tables, which only
 * this module reads or writes. Each method takes the caller's EntityManager when the answer must
 * be read inside the caller's transaction.
 */
@Injectable()
export class OrganizationsQuery {
  constructor(private readonly dataSource: DataSource) {}

  exists(
    organizationId: string,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<boolean> {
    return manager.existsBy(Organization, { id: organizationId });
  }

  /** The organization whose API key `key` is, or undefined for any other string. */
  async organizationOfKey(key: string): Promise<string | undefined> {
    const id = organizationNamedBy(key);
    const rows: Array<{ api_key_hash: Buffer | null }> = id
      ? await this.dataSource.query(`SELECT api_key_hash FROM organization WHERE id = $1`, [id])
      : [];
    // Compared even when nothing was found, so an unknown organization answers no faster.
    return keyMatches(key, rows[0]?.api_key_hash) ? id : undefined;
  }

  /**
   * The organization's members as of `at`, oldest first. `at` is an event's `occurredAt` (its
   * transaction's `now()` cut to the millisecond): a member written in that same transaction
   * (the invitee of `member.invited`) still counts, and one who joined later does not.
   */
  async membersAsOf(
    organizationId: string,
    at: Date,
    manager: EntityManager = this.dataSource.manager,
  ): Promise<MemberView[]> {
    return manager.query(
      `SELECT id, email, role FROM member
       WHERE organization_id = $1 AND created_at < $2::timestamptz + interval '1 millisecond'
       ORDER BY created_at, id`,
      [organizationId, at],
    );
  }
}
