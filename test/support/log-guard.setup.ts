import { guardConsole, leakedLines, plantSecret } from './log-guard';
import { ADMIN_URL_ENV } from './test-run';

// Every test file: whatever its apps logged must hold no planted secret, the test database's
// password included (when it is long enough to be told from ordinary words).
guardConsole();
const adminUrl = process.env[ADMIN_URL_ENV];
const password = adminUrl ? decodeURIComponent(new URL(adminUrl).password) : '';
if (password.length >= 12) plantSecret(password);

afterAll(() => {
  expect(leakedLines()).toEqual([]);
});
