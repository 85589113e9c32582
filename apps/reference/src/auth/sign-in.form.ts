import { IsString, MaxLength } from 'class-validator';

/** The dashboard's sign-in form. */
export class SignInForm {
  @IsString() @MaxLength(512) token!: string;
}
