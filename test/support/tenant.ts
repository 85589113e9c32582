import request from 'supertest';
import { plantSecret } from './log-guard';
import { OPERATOR } from './reference-app';

type App = Parameters<typeof request>[0];

/** An organization created over HTTP, with the API key its routes need. */
export interface Tenant {
  id: string;
  name: string;
  adminId: string;
  /** The `organization.created` event. */
  eventId: string;
  apiKey: string;
  /** The `Authorization` header of its routes. */
  auth: { authorization: string };
}

/** The `Authorization` header that carries `apiKey`. */
export function bearer(apiKey: string): { authorization: string } {
  return { authorization: `Bearer ${apiKey}` };
}

/**
 * `POST /organizations` with the operator token; the key it returns is planted, so no log line
 * may hold it.
 */
export async function createTenant(
  server: App,
  name: string,
  adminEmail = `admin@${name.toLowerCase()}.test`,
): Promise<Tenant> {
  const res = await request(server)
    .post('/organizations')
    .set(OPERATOR)
    .send({ name, adminEmail })
    .expect(201);
  const apiKey = plantSecret(res.body.apiKey as string);
  return { ...res.body, apiKey, auth: bearer(apiKey) };
}
