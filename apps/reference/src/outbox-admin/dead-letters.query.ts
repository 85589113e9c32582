import { Transform, Type } from 'class-transformer';
import {
  IsBoolean,
  IsDate,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';
import type { DeadLetterFilter } from '@app/outbox';

/** `true` and `false` in a query string as booleans; anything else is left for IsBoolean to refuse. */
function BooleanFromQuery(): PropertyDecorator {
  return Transform(({ value }: { value: unknown }) =>
    value === 'true' ? true : value === 'false' ? false : value,
  );
}

/** The conditions a dead-letter query string and a replay or discard body share. */
export class DeadLetterConditions {
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) handler?: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) organizationId?: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) aggregateType?: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) aggregateId?: string;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(200) errorContains?: string;
  @IsOptional() @Type(() => Date) @IsDate() deadAfter?: Date;
  @IsOptional() @Type(() => Date) @IsDate() deadBefore?: Date;
}

/** The query string of GET /outbox/dead-letters and its groups: each field narrows the list. */
export class DeadLettersQuery extends DeadLetterConditions {
  /** Comma-separated event types. */
  @IsOptional() @IsString() @MinLength(1) @MaxLength(2000) type?: string;
  @IsOptional()
  @BooleanFromQuery()
  @IsBoolean()
  includeRetrying?: boolean;
  @IsOptional()
  @BooleanFromQuery()
  @IsBoolean()
  includeDiscarded?: boolean;
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(500) limit?: number;
  @IsOptional() @IsString() @MinLength(1) @MaxLength(500) after?: string;

  toFilter(): DeadLetterFilter {
    return {
      types: this.type?.split(',').map((t) => t.trim()),
      handler: this.handler,
      organizationId: this.organizationId,
      aggregateType: this.aggregateType,
      aggregateId: this.aggregateId,
      errorContains: this.errorContains,
      deadAfter: this.deadAfter,
      deadBefore: this.deadBefore,
      includeRetrying: this.includeRetrying,
      includeDiscarded: this.includeDiscarded,
    };
  }
}
