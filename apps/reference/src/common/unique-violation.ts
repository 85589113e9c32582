import { ConflictException } from '@nestjs/common';

/**
 * Turns a unique-index violation (two requests racing past the same existence check) into the
 * 409 the check would have given; anything else is rethrown as it is.
 */
export function conflictOnUniqueViolation(message: string): (error: unknown) => never {
  return (error: unknown) => {
    const code = (error as { driverError?: { code?: unknown } }).driverError?.code;
    if (code === '23505') throw new ConflictException(message);
    throw error;
  };
}
