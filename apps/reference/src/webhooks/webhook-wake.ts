import { Injectable } from '@nestjs/common';
import { Subject, type Observable } from 'rxjs';

/**
 * An in-process signal from the fan-out to the sender: new deliveries were committed, so the
 * sender claims now instead of at its next poll. Losing a wake only delays a delivery to the
 * poll; the rows are in the table either way.
 */
@Injectable()
export class WebhookWake {
  private readonly subject = new Subject<void>();
  readonly wakes: Observable<void> = this.subject.asObservable();

  wake(): void {
    this.subject.next();
  }
}
