import { plainToInstance, Type } from 'class-transformer';
import {
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  validateSync,
} from 'class-validator';
import { scrubError } from '@app/outbox';

/**
 * The app's environment, validated at boot: a bad value stops the start with every bad
 * variable named (secrets scrubbed).
 */
export class AppConfig {
  /** Unset: `npm start` runs an embedded PostgreSQL with its data under `.data/`. */
  @IsOptional() @Matches(/^postgres(ql)?:\/\//) DATABASE_URL?: string;
  @Type(() => Number) @IsInt() @Min(0) @Max(65535) PORT = 3000;
  @Type(() => Number) @IsInt() @Min(1) OUTBOX_MAX_ATTEMPTS = 10;
  @Type(() => Number) @Min(0.001) OUTBOX_DEAD_RETRY_HOURS = 6;
  @Type(() => Number) @IsInt() @Min(1000) OUTBOX_LEASE_MS = 60_000;
  @Type(() => Number) @IsInt() @Min(1) OUTBOX_HANDLER_TIMEOUT_MS = 10_000;
  @Type(() => Number) @IsInt() @Min(0) OUTBOX_SHUTDOWN_GRACE_MS = 10_000;
  @Type(() => Number) @IsInt() @Min(10) OUTBOX_POLL_INTERVAL_MS = 30_000;
  @Type(() => Number) @Min(0) OUTBOX_RETENTION_DAYS = 7;
  /**
   * `nats://host:4222`: every catalog event is also relayed to NATS JetStream, on the subject
   * `saas.<type>` (a stream must hold `saas.>`); unset: no relay.
   */
  @IsOptional() @Matches(/^(nats|tls):\/\//) NATS_URL?: string;
  /** `smtp://user:pass@host:port`; unset: mails are recorded in the `mail_log` table. */
  @IsOptional() @Matches(/^smtps?:\/\//) SMTP_URL?: string;
  @IsString() MAIL_FROM = 'Outbox Demo <noreply@example.test>';
  @Type(() => Number) @IsInt() @Min(100) WEBHOOK_TIMEOUT_MS = 5000;
  /**
   * Delays between the tries of one webhook delivery, in ms, comma-separated; one more try than
   * delays. Unset: the Standard Webhooks schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h).
   */
  @IsOptional() @Matches(/^\d+(,\d+)*$/) WEBHOOK_RETRY_SCHEDULE_MS?: string;
  /**
   * `1`: webhook endpoints may be on loopback, private and other internal addresses. For local
   * development only (`npm start` turns it on for its walkthrough); otherwise `0`.
   */
  @IsIn(['0', '1']) WEBHOOK_ALLOW_PRIVATE_ADDRESSES = '0';
  /**
   * The bearer token of the operator routes (`/outbox/*`, the dashboard, `/metrics`,
   * `POST /organizations`). `npm start` generates one when it is unset. 16 to 512 printable ASCII
   * characters without spaces: what an `Authorization: Bearer` header can carry, so a token that
   * boots is a token that can be sent.
   */
  @IsString()
  @Matches(/^[\x21-\x7e]{16,512}$/, {
    message: 'OPERATOR_TOKEN must be 16 to 512 printable ASCII characters without spaces',
  })
  OPERATOR_TOKEN!: string;
  /**
   * Host names the app answers to, comma-separated (ports are not part of them); a request for
   * any other `Host` is a 421. The default is the loopback names.
   */
  @Matches(/^[A-Za-z0-9.\-[\]:]+(,[A-Za-z0-9.\-[\]:]+)*$/) ALLOWED_HOSTS =
    'localhost,127.0.0.1,[::1]';
}

/** Variables whose value a configuration error never shows. */
const SECRET_VARIABLES = new Set(['OPERATOR_TOKEN']);

/** `WEBHOOK_RETRY_SCHEDULE_MS` as a list, or undefined for the sender's own schedule. */
export function parseRetrySchedule(text: string | undefined): number[] | undefined {
  return text?.split(',').map(Number);
}

/** `validate` of ConfigModule: typed values, or one error naming every bad variable. */
export function validateAppConfig(env: Record<string, unknown>): AppConfig {
  const config = plainToInstance(AppConfig, env, { exposeDefaultValues: true });
  const errors = validateSync(config, { skipMissingProperties: false });
  if (errors.length > 0) {
    const lines = errors.map(
      (e) =>
        `  - ${e.property} = ${shownValue(e.property, e.value)}: ${Object.values(e.constraints ?? {}).join('; ')}`,
    );
    throw new Error(`Invalid environment:\n${lines.join('\n')}`);
  }
  return config;
}

function shownValue(variable: string, value: unknown): string {
  if (SECRET_VARIABLES.has(variable) && value !== undefined) return '(hidden)';
  return scrubError(JSON.stringify(value) ?? 'undefined');
}
