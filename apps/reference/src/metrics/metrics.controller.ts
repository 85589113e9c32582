import { Controller, Get, Req, Res } from '@nestjs/common';
import type { Request, Response } from 'express';
import { prometheusExporter } from './prometheus';

/** Prometheus scrapes the outbox's metrics here (text exposition format). */
@Controller('metrics')
export class MetricsController {
  @Get()
  scrape(@Req() request: Request, @Res() response: Response): void {
    prometheusExporter().getMetricsRequestHandler(request, response);
  }
}
