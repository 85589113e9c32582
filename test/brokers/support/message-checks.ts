/**
 * The message ids are the emitted ids, each once; says what differs in a few lines rather than
 * a diff of 10,000 entries.
 */
export function expectSameIds(ids: Array<string | undefined>, emitted: string[]): void {
  const want = new Set(emitted);
  const seen = new Set<string | undefined>();
  const twice = ids.filter((id) => seen.has(id) || !seen.add(id));
  const unexpected = [...seen].filter((id) => id === undefined || !want.has(id));
  const missing = emitted.filter((id) => !seen.has(id));
  expect({
    count: ids.length,
    twice: twice.slice(0, 5),
    unexpected: unexpected.slice(0, 5),
    missing: missing.slice(0, 5),
  }).toEqual({ count: emitted.length, twice: [], unexpected: [], missing: [] });
}

/**
 * Every emitted id is there and nothing else; an id may be there more than once only as a
 * republish of the same event. Returns how many such repeats there are.
 */
export function expectEveryIdOnceOrRepublished(
  ids: Array<string | undefined>,
  emitted: string[],
): number {
  const want = new Set(emitted);
  const distinct = new Set(ids);
  expect({
    missing: emitted.filter((id) => !distinct.has(id)).slice(0, 5),
    unexpected: [...distinct].filter((id) => id === undefined || !want.has(id)).slice(0, 5),
  }).toEqual({ missing: [], unexpected: [] });
  return ids.length - distinct.size;
}

/** Per key (payload.key), n only grows: the order of the commits of one producer's key. */
export function expectKeyOrder(messages: Array<{ payload: { key: number; n: number } }>): void {
  const seen = new Map<number, number>();
  for (const m of messages) {
    const last = seen.get(m.payload.key) ?? -1;
    if (m.payload.n <= last) {
      throw new Error(`key ${m.payload.key}: n ${m.payload.n} came after ${last}`);
    }
    seen.set(m.payload.key, m.payload.n);
  }
}
