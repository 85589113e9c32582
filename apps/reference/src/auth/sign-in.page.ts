/** Headers of the sign-in page and its answers: never cached, sniffed, framed or scripted. */
export const SIGN_IN_HEADERS: ReadonlyArray<[string, string]> = [
  ['Content-Type', 'text/html; charset=utf-8'],
  ['Cache-Control', 'no-store'],
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  [
    'Content-Security-Policy',
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  ],
];

/** The sign-in page: one password field for the operator token, posted to itself. */
export function signInPage(action: string, failed: boolean): string {
  const notice = failed ? '<p role="alert" data-testid="sign-in-failed">Wrong token.</p>' : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Outbox: sign in</title>
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto}input{width:100%}</style>
</head><body>
<h1>Outbox dashboard</h1>
${notice}
<form method="post" action="${action}">
<label for="token">Operator token (OPERATOR_TOKEN)</label>
<input id="token" name="token" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
</body></html>
`;
}
