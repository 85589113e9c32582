import { Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { OutboxEngine } from './outbox.engine';

/**
 * Makes the engine stop at the first shutdown hook Nest calls. The outbox module is global,
 * and Nest destroys global modules last, so its own `onModuleDestroy` would come after every
 * feature module had torn down the clients its handlers use, while handlers still started.
 * Nest destroys the root module first and awaits it before any other, so a hook placed there
 * stops claiming and lets running handlers finish (within the grace) while every other module
 * is still intact. Where that is not possible the engine's own hooks still stop it, later.
 */
@Injectable()
export class OutboxShutdownHook implements OnApplicationBootstrap {
  private readonly logger = new Logger('Outbox');

  constructor(
    private readonly modules: ModulesContainer,
    private readonly engine: OutboxEngine,
  ) {}

  onApplicationBootstrap(): void {
    const root = [...this.modules.values()]
      .filter((module) => !module.isGlobal)
      .sort((a, b) => a.distance - b.distance)[0];
    if (!root) return;
    try {
      root.addProvider({
        // One per engine, so two outbox modules in one app each get theirs.
        provide: Symbol('outbox-shutdown-hook'),
        useValue: { onModuleDestroy: () => this.engine.stop() },
      });
    } catch (error) {
      this.logger.warn(
        `Could not hook the outbox into the first shutdown step (${String(error)}); it stops ` +
          `when its own module is destroyed`,
      );
    }
  }
}
