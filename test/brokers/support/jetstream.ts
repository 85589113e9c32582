import type { JetStreamManager } from '@nats-io/jetstream';
import { payloadOf, type BrokerMessage } from './broker-message';

/** A message of a stream, with its place there. */
export interface StreamMessage extends BrokerMessage {
  seq: number;
}

/**
 * The messages of a stream from sequence `fromSeq` on (all of them by default), in stream order,
 * read through the stream's message get.
 */
export async function readStream(
  jsm: JetStreamManager,
  stream: string,
  fromSeq = 1,
): Promise<StreamMessage[]> {
  const info = await jsm.streams.info(stream);
  const out: StreamMessage[] = [];
  for (
    let seq = Math.max(fromSeq, info.state.first_seq);
    seq <= info.state.last_seq && info.state.messages > 0;
    seq++
  ) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (!m) continue;
    const headers: Record<string, string> = {};
    for (const key of m.header?.keys() ?? []) headers[key.toLowerCase()] = m.header.get(key);
    const id = headers['nats-msg-id'] as string | undefined;
    // Nats-Msg-Id is the message's id here; the Nats-* headers are the server's, not the sender's.
    for (const key of Object.keys(headers)) if (key.startsWith('nats-')) delete headers[key];
    const body = m.string();
    out.push({ seq, id, destination: m.subject, headers, body, payload: payloadOf(body) });
  }
  return out;
}
