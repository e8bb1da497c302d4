/**
 * The reply stream: typed events, exactly once, across dropped connections.
 *
 * A send is `POST /api/threads/{id}/messages` with an `Idempotency-Key`. When the
 * connection drops mid-reply (a network error, a cut body, a silent peer) the reply
 * goes on in the service, so the stream picks it up again:
 *
 * - after `meta` (the run id is known): `GET /api/threads/{id}/stream?runId=...` with
 *   `Last-Event-ID` = the last event id seen; the service answers every event after
 *   it, then the live rest;
 * - before `meta`: the same POST with the same `Idempotency-Key`; the service stores
 *   nothing new and answers the same reply from its first event.
 *
 * Events are numbered within the reply, so an event whose id was already seen is
 * dropped: the caller sees each exactly once. Retries are bounded (`streamRetries` in
 * a row without a new event, with exponential backoff); then `StreamInterrupted`.
 */

import type { RequestOptions } from "./core.js";
import { seg } from "./core.js";
import { APIConnectionError, ReplyError, StreamInterrupted, UnexpectedResponse } from "./errors.js";
import type { SendMessageEvents } from "./models.js";
import { SSEDecoder, lines, toId } from "./sse.js";
import type { StreamEvent } from "./core.js";

/** A reply's event: `{ type: "token", id: 7, data: { delta: "Hel" } }`, ... */
export type ReplyEvent = StreamEvent<SendMessageEvents>;
export type ReplyEventType = ReplyEvent["type"];
/** The event of a type: `EventOf<"done">` is `{ type: "done"; id; data: SseDone }`. */
export type EventOf<T extends ReplyEventType> = Extract<ReplyEvent, { type: T }>;

// Every event of the document's map, no more: a build fails when the service's
// events change and this does not (a newer service's unknown event is skipped).
const KNOWN: Record<ReplyEventType, true> = {
  meta: true,
  token: true,
  tool_call: true,
  tool_executing: true,
  tool_result: true,
  auth_challenge: true,
  requires_action: true,
  profile_switch_proposal: true,
  compaction: true,
  done: true,
  error: true,
};

/** The names of the reply's events, as this client knows them. */
export const REPLY_EVENT_TYPES = Object.freeze(Object.keys(KNOWN)) as readonly ReplyEventType[];

/** Statuses worth another try while the service restarts or a proxy hiccups. */
const RETRY_STATUSES = new Set([502, 503, 504]);

/** What the stream needs of the client: one HTTP exchange, and its retry policy. */
export interface StreamTransport {
  open(
    method: "GET" | "POST",
    path: string,
    init: { headers: Record<string, string>; query?: Record<string, unknown>; body?: string },
    signal: AbortSignal,
  ): Promise<Response>;
  error(response: Response): Promise<Error>;
  readonly streamRetries: number;
  readonly streamBackoffMs: number;
  readonly readTimeoutMs: number;
}

export interface ReplyStart {
  threadId: string;
  /** A send's path and JSON body; undefined for an attach (never a send). */
  path?: string | undefined;
  body?: string | undefined;
  idempotencyKey: string;
  runId?: string | undefined;
  /** The last event the caller has: 0 for a send. */
  after?: number;
  options?: RequestOptions | undefined;
}

class Dropped extends Error {}

/**
 * An async iterator of the reply's events (`meta`, `token`, ..., `done` or `error`).
 * Nothing is sent until you iterate (or call `text()`, `final()`). Iterate it once.
 */
export class ReplyStream implements AsyncIterable<ReplyEvent> {
  readonly idempotencyKey: string;
  private currentRunId: string | undefined;
  private lastId: number;
  private failures = 0;
  private started = false;
  private done: EventOf<"done"> | undefined;
  private readonly stop = new AbortController();

  constructor(
    private readonly transport: StreamTransport,
    private readonly start: ReplyStart,
  ) {
    this.idempotencyKey = start.idempotencyKey;
    this.currentRunId = start.runId;
    this.lastId = start.after ?? 0;
    const outer = start.options?.signal;
    if (outer) {
      if (outer.aborted) this.stop.abort(outer.reason);
      else outer.addEventListener("abort", () => this.stop.abort(outer.reason), { once: true });
    }
  }

  /** The reply's run id, once `meta` arrived (what re-attaching needs). */
  get runId(): string | undefined {
    return this.currentRunId;
  }

  /** The id of the last event handed to you. */
  get lastEventId(): number {
    return this.lastId;
  }

  [Symbol.asyncIterator](): AsyncIterator<ReplyEvent> {
    if (this.started) throw new Error("a ReplyStream is iterated once");
    this.started = true;
    return this.events();
  }

  /** Stop reading and close the connection (the reply goes on in the service). */
  close(): void {
    this.stop.abort();
  }

  /** The reply's text as it comes, piece by piece. Throws `ReplyError`. */
  async *textStream(): AsyncGenerator<string> {
    for await (const event of this.untilFinal()) {
      if (event.type === "token") yield event.data.delta;
    }
  }

  /** Read to the end; the reply's text (the tokens joined). Throws `ReplyError`. */
  async text(): Promise<string> {
    let text = "";
    for await (const piece of this.textStream()) text += piece;
    return text;
  }

  /** Read to the end; the `done` event, or throws `ReplyError` for an `error` event. */
  async final(): Promise<EventOf<"done">> {
    for await (const _ of this.untilFinal());
    return this.done!;
  }

  private async *untilFinal(): AsyncGenerator<ReplyEvent> {
    for await (const event of this) {
      if (event.type === "done") this.done = event;
      else if (event.type === "error") {
        const { code, detail } = event.data;
        throw new ReplyError(`the reply failed: ${code}${detail ? `: ${detail}` : ""}`, {
          error: code,
          detail: detail ?? undefined,
        });
      }
      yield event;
    }
    if (!this.done) throw new UnexpectedResponse("the reply's stream ended without done or error");
  }

  /** The next request: the send again (before `meta`), else a re-attach. */
  private request(): { method: "GET" | "POST"; path: string; headers: Record<string, string>; query?: Record<string, unknown>; body?: string } {
    const extra = this.start.options?.headers ?? {};
    if (this.currentRunId === undefined && this.start.body !== undefined && this.start.path) {
      return {
        method: "POST",
        path: this.start.path,
        headers: { ...extra, "Idempotency-Key": this.idempotencyKey, "Content-Type": "application/json" },
        body: this.start.body,
      };
    }
    return {
      method: "GET",
      path: `/api/threads/${seg(this.start.threadId)}/stream`,
      headers: { ...extra, "Last-Event-ID": String(this.lastId) },
      query: this.currentRunId ? { runId: this.currentRunId } : {},
    };
  }

  /** The typed event if it is new, else undefined. */
  private accept(name: string, rawId: string, data: string): ReplyEvent | undefined {
    const id = toId(rawId);
    if (id && id <= this.lastId) return undefined; // sent again after a re-attach or a re-send
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch (exc) {
      throw new UnexpectedResponse(
        `the reply's event ${name} (id ${rawId}) is not JSON (run ${this.currentRunId}, last event ${this.lastId})`,
        { cause: exc },
      );
    }
    if (id) this.lastId = id;
    this.failures = 0;
    if (!Object.hasOwn(KNOWN, name)) return undefined;
    const event = { type: name, id, data: parsed } as ReplyEvent;
    if (event.type === "meta") this.currentRunId = event.data.runId;
    return event;
  }

  private async *events(): AsyncGenerator<ReplyEvent> {
    const transport = this.transport;
    try {
      for (;;) {
        const attempt = new AbortController();
        const onStop = (): void => attempt.abort(this.stop.signal.reason);
        this.stop.signal.addEventListener("abort", onStop, { once: true });
        // a silent peer: the service sends a keep-alive every 15 s, so this long
        // without a byte means the connection is gone
        let timer: ReturnType<typeof setTimeout> | undefined;
        const idle = (): void => {
          clearTimeout(timer);
          timer = setTimeout(() => attempt.abort(new Dropped("no data within the read timeout")), transport.readTimeoutMs);
        };
        try {
          const next = this.request();
          idle();
          const response = await transport.open(next.method, next.path, next, attempt.signal);
          if (RETRY_STATUSES.has(response.status)) {
            await response.body?.cancel().catch(() => undefined);
            throw new Dropped(`status ${response.status}`);
          }
          if (!response.ok) throw await transport.error(response);
          if (!response.body) throw new Dropped("an answer without a body");
          const decoder = new SSEDecoder();
          for await (const line of lines(response.body)) {
            idle();
            const raw = decoder.feed(line);
            if (!raw) continue;
            const event = this.accept(raw.name, raw.id, raw.data);
            if (!event) continue;
            clearTimeout(timer);
            yield event;
            if (event.type === "done" || event.type === "error") return;
            idle();
          }
          throw new Dropped("the stream ended before done or error");
        } catch (exc) {
          if (this.stop.signal.aborted) throw exc; // the caller's abort, or close()
          if (!isDrop(exc)) throw exc;
          await sleep(this.failed(exc), this.stop.signal);
        } finally {
          clearTimeout(timer);
          this.stop.signal.removeEventListener("abort", onStop);
          attempt.abort(); // the connection closes with the attempt
        }
      }
    } finally {
      this.stop.abort(); // an early `break`: the last connection closes too
    }
  }

  /** Count a drop; the delay before the next try, or throw when out of tries. */
  private failed(exc: unknown): number {
    this.failures += 1;
    const { streamRetries, streamBackoffMs } = this.transport;
    if (this.failures > streamRetries) {
      throw new StreamInterrupted(
        `the reply's stream dropped and ${streamRetries} re-attach attempts failed` +
          ` (run ${this.currentRunId}, last event ${this.lastId}): ${String(exc)}`,
        this.currentRunId,
        this.lastId,
        this.failures,
        exc,
      );
    }
    return Math.min(streamBackoffMs * 2 ** (this.failures - 1), 10_000);
  }
}

/**
 * A dropped connection, as `fetch` shows it: a `TypeError` (refused, reset, a cut
 * body: "fetch failed", "terminated", "network error"), our own `Dropped`, or the
 * read timeout's abort (whose reason is a `Dropped`).
 */
export function isDrop(exc: unknown): boolean {
  if (exc instanceof Dropped || exc instanceof TypeError) return true;
  if (exc instanceof APIConnectionError && !(exc instanceof StreamInterrupted)) return true;
  return exc instanceof Error && exc.name === "AbortError" && exc.cause instanceof Dropped;
}

export { Dropped };

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
