import { createParamDecorator, type ExecutionContext } from '@nestjs/common';

const ORGANIZATION = Symbol('organization of the API key');

interface WithOrganization {
  [ORGANIZATION]?: string;
}

export function setCurrentOrganization(request: object, organizationId: string): void {
  (request as WithOrganization)[ORGANIZATION] = organizationId;
}

/**
 * The organization whose API key the request carries, as `OrganizationKeyGuard` found it. On a
 * route without that guard it throws rather than answer for nobody.
 */
export const CurrentOrganization = createParamDecorator(
  (_: unknown, context: ExecutionContext): string => {
    const organizationId = context.switchToHttp().getRequest<WithOrganization>()[ORGANIZATION];
    if (organizationId === undefined) {
      throw new Error('CurrentOrganization is used on a route without OrganizationKeyGuard');
    }
    return organizationId;
  },
);
