/**
 * A multiplayer thread's live events (`GET /api/threads/{id}/events`), typed, across
 * dropped connections: `message` (a person's message) and `reply` (the agent's) carry
 * the SSE id of their place in the thread's history; `reply_started` has none (it is
 * not replayed). When the connection drops the stream asks again with
 * `Last-Event-ID` = the last id seen, so nothing is missed or seen twice. It never
 * ends by itself: `break` out of the loop (or `close()`) to leave.
 */

import type { RequestOptions, StreamEvent } from "./core.js";
import { seg } from "./core.js";
import type { ThreadEventsEvents } from "./models.js";
import { SSEDecoder, lines, toId } from "./sse.js";
import { Dropped, isDrop, type StreamTransport } from "./stream.js";
import { StreamInterrupted } from "./errors.js";

export type ThreadEvent = StreamEvent<ThreadEventsEvents>;

// every event of the document's map (a build fails when they change)
const KNOWN: Record<ThreadEvent["type"], true> = { message: true, reply: true, reply_started: true };

export class ThreadEventStream implements AsyncIterable<ThreadEvent> {
  private lastId: number;
  private failures = 0;
  private readonly stop = new AbortController();

  constructor(
    private readonly transport: StreamTransport,
    private readonly threadId: string,
    after: number | undefined,
    private readonly options?: RequestOptions,
  ) {
    this.lastId = after ?? -1; // -1: from now on
    const outer = options?.signal;
    outer?.addEventListener("abort", () => this.stop.abort(outer.reason), { once: true });
  }

  get lastEventId(): number {
    return this.lastId;
  }

  close(): void {
    this.stop.abort();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ThreadEvent> {
    try {
      for (;;) {
        const attempt = new AbortController();
        const onStop = (): void => attempt.abort(this.stop.signal.reason);
        this.stop.signal.addEventListener("abort", onStop, { once: true });
        try {
          const headers: Record<string, string> = { ...this.options?.headers };
          if (this.lastId >= 0) headers["Last-Event-ID"] = String(this.lastId);
          const path = `/api/threads/${seg(this.threadId)}/events`;
          const response = await this.transport.open("GET", path, { headers }, attempt.signal);
          if (!response.ok) throw await this.transport.error(response);
          if (!response.body) throw new Dropped("an answer without a body");
          const decoder = new SSEDecoder();
          for await (const line of lines(response.body)) {
            const raw = decoder.feed(line);
            if (!raw) continue;
            const id = toId(raw.id);
            if (id && id <= this.lastId) continue;
            if (id) this.lastId = id;
            this.failures = 0;
            if (Object.hasOwn(KNOWN, raw.name)) {
              yield { type: raw.name, id, data: JSON.parse(raw.data) } as ThreadEvent;
            }
          }
          throw new Dropped("the stream ended");
        } catch (exc) {
          if (this.stop.signal.aborted || !isDrop(exc)) throw exc;
          this.failures += 1;
          if (this.failures > this.transport.streamRetries) {
            throw new StreamInterrupted(
              `the thread's events dropped ${this.failures} times in a row: ${String(exc)}`,
              undefined,
              this.lastId,
              this.failures,
              exc,
            );
          }
          const wait = Math.min(this.transport.streamBackoffMs * 2 ** (this.failures - 1), 10_000);
          await new Promise((resolve) => setTimeout(resolve, wait));
        } finally {
          this.stop.signal.removeEventListener("abort", onStop);
          attempt.abort();
        }
      }
    } finally {
      this.stop.abort();
    }
  }
}
