import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import { bearerCredential, unauthorized } from './credentials';
import { OperatorToken } from './operator-token';

/** Lets in requests that carry `Authorization: Bearer $OPERATOR_TOKEN`; a 401 otherwise. */
@Injectable()
export class OperatorGuard implements CanActivate {
  constructor(private readonly token: OperatorToken) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    if (this.token.matches(bearerCredential(http.getRequest()))) return true;
    unauthorized(http.getResponse(), 'the operator token');
  }
}
