import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each organization's API key, as the SHA-256 of the key (the key itself is shown once, when the
 * organization is created). Organizations created before have none until an operator issues one.
 */
export class OrganizationApiKey1771100000000 implements MigrationInterface {
  name = 'OrganizationApiKey1771100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE organization ADD COLUMN api_key_hash bytea`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE organization DROP COLUMN api_key_hash`);
  }
}
