// A Nest 11 CommonJS app with the current companions (@nestjs/schedule 12, @nestjs/terminus 12,
// @nestjs/typeorm 12 accept Nest 11).
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { checkCompanions, companionImports } from './companions.js';
import { AuditLog, emitAndAwaitDelivery, outboxImports } from './example.js';

@Module({ imports: [...companionImports, ...outboxImports], providers: [AuditLog] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  try {
    console.log(`nest11-companions: ${await emitAndAwaitDelivery(app)}`);
    for (const line of await checkCompanions(app)) console.log(`nest11-companions: ${line}`);
  } finally {
    await app.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
