import { IsOptional, IsUUID } from 'class-validator';

export class ListNotificationsQuery {
  /** One member's inbox; absent: every notification of the organization. */
  @IsOptional() @IsUUID() userId?: string;
}
