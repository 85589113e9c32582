import { IsEmail, IsIn, IsString, MaxLength, MinLength } from 'class-validator';

export class CreateOrganizationDto {
  @IsString() @MinLength(1) @MaxLength(200) name!: string;
  /** The first member, an admin: notifications and mails for the organization go to admins. */
  @IsEmail() adminEmail!: string;
}

export class InviteMemberDto {
  @IsEmail() email!: string;
  @IsIn(['admin', 'member']) role!: 'admin' | 'member';
}
