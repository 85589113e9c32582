import { LazyAbort } from './lazy-abort';

describe('LazyAbort', () => {
  it('aborts a signal read before the abort', () => {
    const abort = new LazyAbort();
    const signal = abort.signal;
    expect(signal.aborted).toBe(false);
    abort.abort(new Error('budget spent'));
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe('budget spent');
  });

  it('gives an aborted signal, with the first reason, when first read after the abort', () => {
    const abort = new LazyAbort();
    abort.abort(new Error('first'));
    abort.abort(new Error('second'));
    expect(abort.signal.aborted).toBe(true);
    expect((abort.signal.reason as Error).message).toBe('first');
  });

  it('gives the same signal on every read', () => {
    const abort = new LazyAbort();
    expect(abort.signal).toBe(abort.signal);
  });
});
