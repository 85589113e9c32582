import type { ModuleRef } from '@nestjs/core';
import { loadOptionalPackage } from '../common/optional-package.util';

/** The part of `@nestjs/schedule`'s SchedulerRegistry the retention sweep uses. */
export interface OutboxScheduler {
  addInterval(name: string, interval: NodeJS.Timeout): void;
  doesExist(type: 'interval', name: string): boolean;
  deleteInterval(name: string): void;
}

/**
 * The app's SchedulerRegistry when it imports `ScheduleModule` (the sweep then shows up next to
 * its other jobs); otherwise plain timers kept here. `@nestjs/schedule` is an optional peer.
 */
export function findScheduler(moduleRef: ModuleRef): OutboxScheduler {
  const schedule = loadOptionalPackage<{ SchedulerRegistry: unknown }>('@nestjs/schedule');
  if (schedule) {
    try {
      return moduleRef.get<OutboxScheduler>(schedule.SchedulerRegistry as never, {
        strict: false,
      });
    } catch {
      // Installed, but the app does not import ScheduleModule.
    }
  }
  return new OwnIntervals();
}

class OwnIntervals implements OutboxScheduler {
  private readonly intervals = new Map<string, NodeJS.Timeout>();

  addInterval(name: string, interval: NodeJS.Timeout): void {
    this.intervals.set(name, interval);
  }

  doesExist(_type: 'interval', name: string): boolean {
    return this.intervals.has(name);
  }

  deleteInterval(name: string): void {
    clearInterval(this.intervals.get(name));
    this.intervals.delete(name);
  }
}
