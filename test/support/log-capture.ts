import type { LoggerService } from '@nestjs/common';

export interface CapturedLine {
  level: 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';
  message: string;
  context?: string;
}

/** A Nest logger that keeps every line, for tests that assert on what an app logs. */
export class LogCapture implements LoggerService {
  readonly lines: CapturedLine[] = [];

  log(message: unknown, context?: string) {
    this.push('log', message, context);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.push('error', message, rest.map(String).join(' '));
  }
  warn(message: unknown, context?: string) {
    this.push('warn', message, context);
  }
  debug(message: unknown, context?: string) {
    this.push('debug', message, context);
  }
  verbose(message: unknown, context?: string) {
    this.push('verbose', message, context);
  }
  fatal(message: unknown, context?: string) {
    this.push('fatal', message, context);
  }

  /** Lines at `level` whose message contains `text`. */
  matching(level: CapturedLine['level'], text: string): CapturedLine[] {
    return this.lines.filter((l) => l.level === level && l.message.includes(text));
  }

  private push(level: CapturedLine['level'], message: unknown, context?: string) {
    this.lines.push({ level, message: String(message), context });
  }
}
