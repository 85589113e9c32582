import {
  IsInt,
  IsISO4217CurrencyCode,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';

export class IssueInvoiceDto {
  @IsString() @MinLength(1) @MaxLength(50) number!: string;
  @IsInt() @Min(1) @Max(100_000_000) amountCents!: number;
  @IsISO4217CurrencyCode() currency!: string;
}
