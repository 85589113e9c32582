import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsOptional,
  IsString,
  IsUUID,
  MaxLength,
  MinLength,
  ValidateNested,
} from 'class-validator';
import type { DeadLetterFilter, DeadLetterSelector } from '@app/outbox';
import { DeadLetterConditions } from './dead-letters.query';

/** The filter of a replay or discard, as JSON: each field narrows the selection. */
export class DeadLetterFilterBody extends DeadLetterConditions implements DeadLetterFilter {
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @MinLength(1, { each: true })
  @MaxLength(200, { each: true })
  types?: string[];
  @IsOptional() @IsBoolean() includeRetrying?: boolean;
  @IsOptional() @IsBoolean() includeDiscarded?: boolean;
}

/**
 * The body of POST /outbox/dead-letters/replay and /discard: `ids`, or a `filter` (with `all`
 * to mean every dead letter); OutboxAdmin refuses a filter without a condition.
 */
class DeadLetterChangeBody {
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @ArrayMaxSize(10_000)
  @IsUUID('all', { each: true })
  ids?: string[];
  @IsOptional()
  @ValidateNested()
  @Type(() => DeadLetterFilterBody)
  filter?: DeadLetterFilterBody;
  @IsOptional() @IsBoolean() all?: boolean;
  @IsOptional() @IsBoolean() dryRun?: boolean;
  /** The `cursor` of the previous answer with the same filter: goes on after it. */
  @IsOptional() @IsString() @MaxLength(200) after?: string;

  toSelector(): DeadLetterSelector {
    // One of the two: OutboxAdmin names the field when neither is given.
    if (this.ids) return { ids: this.ids };
    return this.filter ? { filter: { ...this.filter }, all: this.all } : ({} as never);
  }
}

export class ReplayBody extends DeadLetterChangeBody {
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @IsString({ each: true })
  @MinLength(1, { each: true })
  @MaxLength(200, { each: true })
  handlers?: string[];
}

export class DiscardBody extends DeadLetterChangeBody {
  @IsString() @MinLength(1) @MaxLength(500) reason!: string;
}
