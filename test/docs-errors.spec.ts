import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as outbox from '@app/outbox';
import * as admin from '@app/outbox/admin';
import * as bridge from '@app/outbox/bridge';
import * as testing from '@app/outbox/testing';

/** The reference's table of errors names every error class the package exports, and no other. */

function errorsSection(): string {
  const text = readFileSync(join(__dirname, '..', 'docs', 'reference.md'), 'utf8');
  const start = text.indexOf('\n## Errors\n');
  const end = text.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('docs/reference.md has no "## Errors" section');
  return text.slice(start, end);
}

// Every entry point's: the root, /admin, /bridge and /testing.
const exported = Object.entries({ ...outbox, ...admin, ...bridge, ...testing })
  .filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error)
  .map(([name]) => name)
  .filter((name) => name !== 'OutboxError')
  .sort();

it('lists every exported error in docs/reference.md, each once, and only those', () => {
  const rows = [...errorsSection().matchAll(/^\| `(\w+)`/gm)].map((m) => m[1]);
  expect([...rows].sort()).toEqual(exported);
  expect(new Set(rows).size).toBe(rows.length);
});
