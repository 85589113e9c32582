// A Nest 12 ES module app with the current companions.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { checkCompanions, companionImports } from './companions.js';
import { AuditLog, emitAndAwaitDelivery, outboxImports } from './example.js';

@Module({ imports: [...companionImports, ...outboxImports], providers: [AuditLog] })
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
try {
  console.log(`nest12-esm: ${await emitAndAwaitDelivery(app)}`);
  for (const line of await checkCompanions(app)) console.log(`nest12-esm: ${line}`);
} finally {
  await app.close();
}
