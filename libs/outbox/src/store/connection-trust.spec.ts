import { fakeClock } from '../common/fake-clock.spec-support';
import {
  ConnectionTrust,
  SUSPECT_STATEMENT_MS,
  ServerLostError,
  serverLost,
} from './connection-trust';

describe('serverLost', () => {
  it.each([
    ['08006', 'connection failure'],
    ['57P01', 'terminating connection due to administrator command'],
    ['57P02', 'terminating connection due to crash of another server process'],
    ['57P03', 'the database system is starting up'],
    ['25006', 'cannot execute UPDATE in a read-only transaction'],
    ['ECONNRESET', 'read ECONNRESET'],
    [undefined, 'no answer from the database within 6000 ms; the connection was discarded'],
    [undefined, 'Connection terminated unexpectedly'],
  ])('says the server is lost for %s (%s)', (code, message) => {
    expect(serverLost({ code, message })).toBe(true);
  });

  it.each([
    ['55P03', 'canceling statement due to lock timeout'],
    ['57014', 'canceling statement due to statement timeout'],
    ['23505', 'duplicate key value violates unique constraint'],
    [undefined, 'no free pool connection within 6000 ms; nothing was sent'],
  ])('does not for %s (%s)', (code, message) => {
    expect(serverLost({ code, message })).toBe(false);
  });
});

describe('ConnectionTrust', () => {
  it('trusts the connections opened since the server was last lost, and none it never saw', () => {
    const trust = new ConnectionTrust();
    const before = {};
    trust.opened(before);
    expect(trust.trusted(before)).toBe(true);
    expect(trust.trusted({})).toBe(true);
    trust.distrust();
    const after = {};
    trust.opened(after);
    expect(trust.trusted(before)).toBe(false);
    expect(trust.trusted({})).toBe(false);
    expect(trust.trusted(after)).toBe(true);
  });
});

describe('ConnectionTrust and the statements out', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const { now, advance } = fakeClock();

  it('gives up the statements out when the server is lost, each once it has waited SUSPECT_STATEMENT_MS', () => {
    const trust = new ConnectionTrust(now);
    const old = jest.fn();
    const young = jest.fn();
    const ended = jest.fn();
    trust.sent(old);
    const end = trust.sent(ended);
    end();
    advance(SUSPECT_STATEMENT_MS);
    trust.sent(young);
    advance(SUSPECT_STATEMENT_MS / 2);
    trust.distrust();
    advance(0);
    expect(old).toHaveBeenCalledWith(expect.any(ServerLostError));
    expect(young).not.toHaveBeenCalled();
    advance(SUSPECT_STATEMENT_MS / 2);
    expect(young).toHaveBeenCalledWith(expect.any(ServerLostError));
    expect(ended).not.toHaveBeenCalled();
    expect(serverLost(new ServerLostError())).toBe(true);
  });
});
