import type { JetStreamManager } from '@nats-io/jetstream';

export interface StreamMessage {
  seq: number;
  subject: string;
  msgId: string;
  headers: Record<string, string>;
  payload: { key: number; n: number } & Record<string, unknown>;
}

/** Every message of a stream, in stream order, read through the stream's direct get. */
export async function readStream(jsm: JetStreamManager, stream: string): Promise<StreamMessage[]> {
  const info = await jsm.streams.info(stream);
  const out: StreamMessage[] = [];
  for (
    let seq = info.state.first_seq;
    seq <= info.state.last_seq && info.state.messages > 0;
    seq++
  ) {
    const m = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (!m) continue;
    const headers: Record<string, string> = {};
    for (const key of m.header?.keys() ?? []) headers[key.toLowerCase()] = m.header.get(key);
    out.push({
      seq,
      subject: m.subject,
      msgId: headers['nats-msg-id'],
      headers,
      payload: parsed(m.string()),
    });
  }
  return out;
}

function parsed(text: string): StreamMessage['payload'] {
  try {
    return JSON.parse(text) as StreamMessage['payload'];
  } catch {
    return { key: -1, n: -1, text };
  }
}
