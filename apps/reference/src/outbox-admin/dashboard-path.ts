/** Where the outbox dashboard is mounted; its sign-in page sits under it. */
export const DASHBOARD_PATH = '/outbox/ui';
