/**
 * A clock for unit specs that moves only with Jest's fake timers: `advance` moves both, so code
 * that reads `now()` and sets timers sees one time. Not part of the library (specs only).
 */
export function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let clock = 0;
  return {
    now: () => clock,
    advance: (ms) => {
      clock += ms;
      jest.advanceTimersByTime(ms);
    },
  };
}
