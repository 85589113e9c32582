import { Controller, Get, Req, Res, UseGuards } from '@nestjs/common';
import type { Request, Response } from 'express';
import { OperatorGuard } from '../auth/operator.guard';
import { prometheusExporter } from './prometheus';

/**
 * Prometheus scrapes the outbox's metrics here (text exposition format), with the operator
 * token (`authorization.credentials` of its scrape config).
 */
@Controller('metrics')
@UseGuards(OperatorGuard)
export class MetricsController {
  @Get()
  scrape(@Req() request: Request, @Res() response: Response): void {
    prometheusExporter().getMetricsRequestHandler(request, response);
  }
}
