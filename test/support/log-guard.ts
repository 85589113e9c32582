import { ConsoleLogger, type LogLevel } from '@nestjs/common';
import { inspect } from 'node:util';

/**
 * Everything the apps under test log, kept in memory (and printed too when OUTBOX_TEST_LOG is
 * set), so each test file can prove that no secret it planted reached a log line. Secrets are
 * planted with `plantSecret`; anything shaped like a webhook signing secret or an organization's
 * API key counts as planted.
 */

const ALWAYS_SECRET = [/whsec_[A-Za-z0-9+/=]{8,}/, /oak_[0-9a-f-]{36}_[A-Za-z0-9_-]{8,}/];

const lines: string[] = [];
const planted = new Set<string>();

/** Marks `secret` as something no log line may contain, for the rest of this test file. */
export function plantSecret(secret: string): string {
  planted.add(secret);
  return secret;
}

/** Lines logged so far in this test file that contain a planted secret. */
export function leakedLines(): string[] {
  return lines.filter(
    (line) =>
      [...planted].some((secret) => line.includes(secret)) ||
      ALWAYS_SECRET.some((pattern) => pattern.test(line)),
  );
}

/** How many lines were captured, so a test can show the guard saw the app's logs at all. */
export function capturedLineCount(): number {
  return lines.length;
}

export function recordLine(line: string): void {
  lines.push(line);
}

/** A Nest logger at every level whose lines go to the guard (and to stdout when asked). */
export class GuardedLogger extends ConsoleLogger {
  constructor() {
    super('', {
      logLevels: ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] satisfies LogLevel[],
    });
  }

  protected override printMessages(
    messages: unknown[],
    context = '',
    logLevel: LogLevel = 'log',
    writeStreamType?: 'stdout' | 'stderr',
  ): void {
    for (const message of messages) {
      recordLine(
        `${logLevel} [${context}] ${typeof message === 'string' ? message : inspect(message, { depth: 10 })}`,
      );
    }
    if (process.env.OUTBOX_TEST_LOG)
      super.printMessages(messages, context, logLevel, writeStreamType);
  }

  protected override printStackTrace(stack: string): void {
    recordLine(`stack ${stack}`);
    if (process.env.OUTBOX_TEST_LOG) super.printStackTrace(stack);
  }
}

/** Records what reaches the console directly (outside Nest's logger) as well. */
export function guardConsole(): void {
  for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    const original = console[method].bind(console);
    console[method] = (...args: unknown[]) => {
      recordLine(
        `console.${method} ${args.map((a) => (typeof a === 'string' ? a : inspect(a, { depth: 10 }))).join(' ')}`,
      );
      original(...args);
    };
  }
}
