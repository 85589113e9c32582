import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The organization each mail was sent for, so an organization reads its own mails only. Mails
 * logged before have none, and no organization sees them.
 */
export class MailLogOrganization1771100001000 implements MigrationInterface {
  name = 'MailLogOrganization1771100001000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE mail_log ADD COLUMN organization_id uuid`);
    await queryRunner.query(
      `CREATE INDEX mail_log_organization_created_idx ON mail_log (organization_id, created_at)`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX mail_log_organization_created_idx`);
    await queryRunner.query(`ALTER TABLE mail_log DROP COLUMN organization_id`);
  }
}
