import { onAbort } from './abort-subscribers.util';

describe('onAbort', () => {
  it('calls each subscriber once when the signal aborts, and not those that left', () => {
    const controller = new AbortController();
    const calls: string[] = [];
    onAbort(controller.signal, () => calls.push('a'));
    const leave = onAbort(controller.signal, () => calls.push('b'));
    onAbort(controller.signal, () => calls.push('c'));
    leave();
    controller.abort();
    controller.abort();
    expect(calls).toEqual(['a', 'c']);
  });

  it('calls a subscriber at once when the signal has already aborted', () => {
    const controller = new AbortController();
    controller.abort();
    const listener = jest.fn();
    onAbort(controller.signal, listener);
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('does nothing without a signal', () => {
    const listener = jest.fn();
    onAbort(undefined, listener)();
    expect(listener).not.toHaveBeenCalled();
  });
});
