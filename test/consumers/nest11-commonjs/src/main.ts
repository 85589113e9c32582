// A Nest 11 CommonJS app without the optional peers (@nestjs/terminus, @nestjs/schedule): the
// outbox must install, compile and run without them.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AuditLog, emitAndAwaitDelivery, outboxImports } from './example';

@Module({ imports: [...outboxImports], providers: [AuditLog] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  try {
    console.log(`nest11-commonjs: ${await emitAndAwaitDelivery(app)}`);
  } finally {
    await app.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
