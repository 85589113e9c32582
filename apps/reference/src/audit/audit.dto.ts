import { Type } from 'class-transformer';
import { IsInt, IsOptional, IsUUID, Max, Min } from 'class-validator';

export class ListAuditQuery {
  /** Only entries of this organization. */
  @IsOptional() @IsUUID() organizationId?: string;
  /** At most this many entries, newest first (default 100). */
  @IsOptional() @Type(() => Number) @IsInt() @Min(1) @Max(1000) limit?: number;
}
