/**
 * `npm run bench:scrub` (also the first part of `npm run bench`): ms per `scrubError` call for
 * a typical handler error and for 2 MB messages built to drive each redaction rule to its worst
 * case: long runs a pattern could start anywhere in, starts that never find their end, quotes
 * and blocks that never close. Every figure should be far below a millisecond-scale budget and
 * must not grow with the size of the message.
 *
 * BENCH_SCRUB_MB (2) sets the size of the adversarial messages; BENCH_SCRUB_RUNS (50) the
 * number of timed calls per input, after as many untimed ones. With BENCH_ONLY set, it runs only
 * when the list names `scrub`.
 */
import { performance } from 'node:perf_hooks';
import { scrubError } from '../libs/outbox/src';
import { selectedNames } from './support/config';

const SIZE = Math.round(Number(process.env.BENCH_SCRUB_MB ?? 2) * 1_000_000);
const RUNS = Number(process.env.BENCH_SCRUB_RUNS ?? 50);

const TYPICAL = new Error(
  'HTTP 502 from https://hooks.example.com/v1/events?key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW: ' +
    '{"error":"upstream unavailable","request_id":"req_7f3a9c","retry_after":30} ' +
    'while connecting to postgres://app:s3cr3t-pw@db.internal:5432/app with ' +
    'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln (attempt 3 of 5)',
);

const ADVERSARIAL: ReadonlyArray<readonly [string, string]> = [
  ['a-', 'a-'],
  ['base64', 'QUJD'],
  ['a@', 'a@'],
  ['a:', 'a:'],
  ['://', '://'],
  ['a://', 'a://'],
  ['://u:', '://u:'],
  ['x:p/', 'x:p/'],
  ['password=', 'password='],
  ['"password":"', '"password":"'],
  ['password="\\', 'password="\\'],
  ['x-api-key', 'x-api-key'],
  ['Bearer ', 'Bearer '],
  ['bearer 1 ', 'bearer 1 '],
  ['authorization: x ', 'authorization: x '],
  ['Cookie: a=1;', 'Cookie: a=1;'],
  ['cookie:.', 'cookie:.'],
  ['BEGIN PRIVATE KEY', '-----BEGIN PRIVATE KEY-----'],
  ['END A', '-----END A '],
  ['eyJa.', 'eyJa.'],
  ['xoxb-', 'xoxb-'],
];

function msPerCall(err: unknown): { median: number; p95: number } {
  for (let i = 0; i < RUNS; i++) scrubError(err);
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    scrubError(err);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(times.length * q))];
  return { median: at(0.5), p95: at(0.95) };
}

function report(label: string, err: unknown): void {
  const { median, p95 } = msPerCall(err);
  console.log(
    `  ${label.padEnd(34)} ${median.toFixed(3).padStart(8)} ${p95.toFixed(3).padStart(8)}`,
  );
}

function main(): void {
  console.log(`scrubError, ms per call (median and 95th percentile of ${RUNS})`);
  console.log(`  ${'input'.padEnd(34)} ${'median'.padStart(8)} ${'p95'.padStart(8)}`);
  report(`typical error (${TYPICAL.message.length} chars)`, TYPICAL);
  for (const [label, unit] of ADVERSARIAL) {
    const message = unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE);
    report(`${(SIZE / 1_000_000).toFixed(0)} MB of ${JSON.stringify(label)}`, new Error(message));
  }
}

// BENCH_ONLY picks scenarios of `npm run bench`; this one is `scrub`.
if (selectedNames()?.has('scrub') ?? true) main();
