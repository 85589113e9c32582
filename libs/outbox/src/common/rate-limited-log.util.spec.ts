import { RateLimitedLog } from './rate-limited-log.util';

describe('RateLimitedLog', () => {
  it('lets `limit` lines through per window and counts the rest into the next one', () => {
    const lines: string[] = [];
    let now = 0;
    const log = new RateLimitedLog(
      (line) => lines.push(line),
      2,
      1000,
      () => now,
    );
    for (let i = 1; i <= 5; i++) log.log(`line ${i}`);
    expect(lines).toEqual(['line 1', 'line 2']);
    now = 1000;
    log.log('line 6');
    log.log('line 7');
    log.log('line 8');
    expect(lines).toEqual([
      'line 1',
      'line 2',
      'line 6 (3 similar lines held back before this one)',
      'line 7',
    ]);
  });
});
