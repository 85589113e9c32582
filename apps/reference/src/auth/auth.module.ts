import { Global, Module } from '@nestjs/common';
import { OrganizationsModule } from '../organizations/organizations.module';
import { DashboardSignInController } from './dashboard-sign-in.controller';
import { OperatorToken } from './operator-token';

/**
 * Who may call what: the operator token for the operator routes and the dashboard, an
 * organization's API key for its own routes. Global, so every module's guards (and the
 * dashboard's, resolved in the library's module) find what they inject.
 */
@Global()
@Module({
  imports: [OrganizationsModule],
  controllers: [DashboardSignInController],
  providers: [OperatorToken],
  exports: [OperatorToken, OrganizationsModule],
})
export class AuthModule {}
