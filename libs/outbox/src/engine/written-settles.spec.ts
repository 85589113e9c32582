import type { OutboxRecord } from '../store/lease/lease.types';
import type { Settle } from './settle-statements';
import { WrittenSettles } from './written-settles';

const record = (id: string, sequenced = false) => ({ id, sequenced }) as OutboxRecord;
const settle = { attempts: 1, handlers: ['h'] };

function delivered(id: string, sequenced = false): Settle {
  return { kind: 'delivered', record: record(id, sequenced), settle: { id, ...settle } };
}

describe('WrittenSettles', () => {
  it('gives back the delivered, failed and held-by-limit settles written since a time, once', () => {
    const written = new WrittenSettles();
    const failed: Settle = {
      kind: 'failed',
      record: record('f'),
      settle: {
        id: 'f',
        ...settle,
        failedHandlers: ['h'],
        error: null,
        retryDelayMs: 100,
        dead: false,
        failures: [],
        pending: ['h'],
      },
    };
    const limited: Settle = {
      kind: 'limited',
      record: record('l'),
      settle: {
        id: 'l',
        ...settle,
        dueAt: new Date(5_000),
        retryDelayMs: 3_000,
        leaseExpiresAt: new Date(30_000),
      },
    };
    written.remember([delivered('old')], new Set(), 1_000);
    written.remember(
      [delivered('a'), failed, limited, delivered('stale')],
      new Set(['stale']),
      2_000,
    );
    expect(written.takeSince(2_000)).toEqual({
      delivered: [{ id: 'a', ...settle }],
      failed: [failed.settle],
      limited: [limited.settle],
    });
    expect(written.takeSince(0)).toEqual({ delivered: [], failed: [], limited: [] });
  });

  it('keeps no releases, held settles or settles of events placed for ordered handlers', () => {
    const written = new WrittenSettles();
    written.remember(
      [
        { kind: 'release', record: record('r'), settle: { id: 'r', attempts: 1 } },
        { kind: 'held', record: record('h', true), settle: { id: 'h', ...settle } },
        delivered('ordered', true),
      ],
      new Set(),
      1_000,
    );
    expect(written.takeSince(0)).toEqual({ delivered: [], failed: [], limited: [] });
  });

  it('keeps the newest 10,000', () => {
    const written = new WrittenSettles();
    for (let i = 0; i < 25_000; i++) written.remember([delivered(`e${i}`)], new Set(), i);
    const { delivered: kept } = written.takeSince(0);
    expect(kept).toHaveLength(10_000);
    expect(kept[0].id).toBe('e15000');
    expect(kept.at(-1)!.id).toBe('e24999');
  });
});
