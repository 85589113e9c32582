import { Type } from 'class-transformer';
import {
  ArrayNotEmpty,
  ArrayUnique,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsUrl,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import { PUBLIC_EVENT_TYPES } from '../events/event-catalog';

export class CreateWebhookEndpointDto {
  /**
   * http or https only. `require_tld: false` admits `http://127.0.0.1:port` and internal
   * hosts; credentials in the URL are refused (fetch would refuse them at every attempt).
   */
  @IsUrl({
    protocols: ['http', 'https'],
    require_protocol: true,
    require_tld: false,
    disallow_auth: true,
  })
  @MaxLength(2000)
  url!: string;

  /** A non-empty subset of the public event types. */
  @IsArray()
  @ArrayNotEmpty()
  @ArrayUnique()
  @IsIn(PUBLIC_EVENT_TYPES, { each: true })
  events!: string[];
}

export class UpdateWebhookEndpointDto {
  @IsBoolean() enabled!: boolean;
}

export class ListDeliveriesQuery {
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(500) limit?: number;
}
