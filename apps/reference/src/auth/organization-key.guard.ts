import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { bearerCredential, unauthorized } from './credentials';
import { setCurrentOrganization } from './current-organization';

/**
 * Lets in requests that carry an organization's API key (`Authorization: Bearer oak_...`), and
 * makes that organization the one the route acts on (`@CurrentOrganization()`). A route that
 * names an organization in its path (`/organizations/:organizationId/...`) must name the key's:
 * another one is a 404, as if it did not exist, so a key learns nothing about other tenants. The
 * match is exact: the routes use the path's text as it came, and an id in another letter case
 * would file the tenant's rows under a spelling its own lists never show.
 */
@Injectable()
export class OrganizationKeyGuard implements CanActivate {
  constructor(private readonly organizations: OrganizationsQuery) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const request = http.getRequest<{
      headers: Record<string, string | string[] | undefined>;
      params?: Record<string, string | undefined>;
    }>();
    const key = bearerCredential(request);
    const organizationId = key && (await this.organizations.organizationOfKey(key));
    if (!organizationId) unauthorized(http.getResponse(), "an organization's API key");
    const named = request.params?.organizationId;
    if (named !== undefined && named !== organizationId) {
      throw new NotFoundException(`organization ${named} does not exist`);
    }
    setCurrentOrganization(request, organizationId);
    return true;
  }
}
