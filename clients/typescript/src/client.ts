/**
 * The client: every operation of the service as a typed method (`client.agents.create`,
 * `client.threads.messages.list`, ...: generated, `resources.ts`), and
 * `client.sendMessage` for the reply's stream. It needs nothing but `fetch`: Node.js
 * 18+, browsers, Deno, Bun, workers.
 *
 * ```ts
 * const client = new AgentsvcClient({ baseUrl: "http://127.0.0.1:8000", apiKey: "ask_..." });
 * const agent = await client.agents.create({ name: "Support" });
 * const thread = await client.threads.create({ agentId: agent.id });
 * for await (const text of client.sendMessage(thread.id, "Hello!").textStream()) {
 *   process.stdout.write(text);
 * }
 * ```
 */

import type { Call, ReplyCall, RequestOptions, Requester } from "./core.js";
import { uuid4 } from "./core.js";
import { APIConnectionError, UnexpectedResponse, fromResponse } from "./errors.js";
import type { SendMessageBody } from "./models.js";
import { Resources } from "./resources.js";
import { readEvents } from "./sse.js";
import { ReplyStream, type StreamTransport } from "./stream.js";
import { ThreadEventStream } from "./thread-events.js";

export interface ClientOptions {
  /** The service's address: `http://127.0.0.1:8000`. */
  baseUrl: string;
  /** An API key (`ask_...`) or a JWT, sent as `Authorization: Bearer ...`. */
  apiKey?: string;
  /** A `fetch` of your own (a test double, a proxy's); the global one by default. */
  fetch?: typeof fetch;
  /** Headers for every call. */
  headers?: Record<string, string>;
  /** Re-attach attempts in a row, without a new event, before `StreamInterrupted` (5). */
  streamRetries?: number;
  /** The first re-attach's delay; it doubles each time, up to 10 s (250 ms). */
  streamBackoffMs?: number;
  /** A stream silent this long is taken for dropped (the service's keep-alive comes every 15 s): 45 s. */
  readTimeoutMs?: number;
}

/** A send's options: the body's fields but `content`, and the call's. */
export type SendOptions = Omit<SendMessageBody, "content"> & RequestOptions;

export class AgentsvcClient extends Resources implements Requester, StreamTransport {
  readonly baseUrl: string;
  readonly streamRetries: number;
  readonly streamBackoffMs: number;
  readonly readTimeoutMs: number;
  private readonly apiKey: string | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly headers: Record<string, string>;

  constructor(options: ClientOptions) {
    super();
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    // bound: a browser's fetch called as a method of another object throws
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.headers = options.headers ?? {};
    this.streamRetries = options.streamRetries ?? 5;
    this.streamBackoffMs = options.streamBackoffMs ?? 250;
    this.readTimeoutMs = options.readTimeoutMs ?? 45_000;
  }

  /**
   * Send a message; iterate the answer for the reply's events (`meta`, `token`, ...,
   * `done` or `error`). Nothing is sent until you iterate it (or call `text()`,
   * `final()`). Every send carries an `Idempotency-Key` (a fresh UUID unless given);
   * a dropped connection is picked up again (see `ReplyStream`).
   */
  sendMessage(threadId: string, content: string, options: SendOptions = {}): ReplyStream {
    const { idempotencyKey, signal, headers, ...fields } = options;
    return this.threads.messages.send(threadId, { content, ...fields }, { idempotencyKey, signal, headers });
  }

  /** @internal the generated methods' one way out. */
  async request(call: Call): Promise<unknown> {
    const headers: Record<string, string> = { ...call.options?.headers };
    const query = { ...call.query };
    for (const [name, header] of Object.entries(call.headerParams ?? {})) {
      const value = query[name];
      delete query[name];
      if (value !== undefined && value !== null) headers[header] = String(value);
    }
    let body: BodyInit | undefined;
    if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.body);
    } else if (call.form !== undefined) {
      body = toForm(call.form);
    }
    if (call.method === "POST" && call.options?.idempotencyKey) {
      headers["Idempotency-Key"] = call.options.idempotencyKey;
    }
    const init: { headers: Record<string, string>; query?: Record<string, unknown>; body?: BodyInit } = { headers, query };
    if (body !== undefined) init.body = body;
    const response = await this.open(call.method, call.path, init, call.options?.signal);
    if (!response.ok) throw await fromResponse(response);
    switch (call.answer) {
      case "none":
        await response.body?.cancel();
        return undefined;
      case "text":
        return response.text();
      case "bytes":
        return new Uint8Array(await response.arrayBuffer());
      case "events":
        return response.body ? readEvents(response.body) : [];
      case "json": {
        const text = await response.text();
        try {
          return text ? (JSON.parse(text) as unknown) : undefined;
        } catch (exc) {
          throw new UnexpectedResponse(`${call.method} ${call.path}: the answer is not JSON`, {
            status: response.status,
            requestId: response.headers.get("x-request-id") ?? undefined,
            body: text.slice(0, 500),
            cause: exc,
          });
        }
      }
    }
  }

  /** @internal */
  replyStream(call: ReplyCall): ReplyStream {
    return new ReplyStream(this, {
      threadId: call.threadId,
      path: call.path,
      body: JSON.stringify(call.body),
      idempotencyKey: call.options?.idempotencyKey ?? uuid4(),
      options: call.options,
    });
  }

  /** @internal */
  attachStream(
    threadId: string,
    query: { runId?: string | null; after?: number; lastEventId?: number | string },
    options?: RequestOptions,
  ): ReplyStream {
    const after = query.lastEventId !== undefined ? Number(query.lastEventId) : (query.after ?? 0);
    return new ReplyStream(this, {
      threadId,
      runId: query.runId ?? undefined,
      after,
      idempotencyKey: "",
      options,
    });
  }

  /** @internal */
  threadEventStream(
    threadId: string,
    query: { after?: number | null; lastEventId?: number | string },
    options?: RequestOptions,
  ): ThreadEventStream {
    const after = query.lastEventId !== undefined ? Number(query.lastEventId) : (query.after ?? undefined);
    return new ThreadEventStream(this, threadId, after, options);
  }

  /** @internal one HTTP exchange: the answer whatever its status, or `APIConnectionError`. */
  async open(
    method: string,
    path: string,
    init: { headers: Record<string, string>; query?: Record<string, unknown>; body?: BodyInit },
    signal?: AbortSignal,
  ): Promise<Response> {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(init.query ?? {})) {
      if (value === undefined || value === null) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    const headers: Record<string, string> = { Accept: "application/json, text/event-stream", ...this.headers, ...init.headers };
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    const request: RequestInit = { method, headers };
    if (init.body !== undefined) request.body = init.body;
    if (signal) request.signal = signal;
    try {
      return await this.fetchImpl(url, request);
    } catch (exc) {
      // fetch's TypeError: refused, reset, DNS (a stream takes it for a drop and tries again)
      if (exc instanceof TypeError) {
        throw new APIConnectionError(`${method} ${path}: no answer: ${exc.message}`, { cause: exc });
      }
      throw exc;
    }
  }

  /** @internal */
  error(response: Response): Promise<Error> {
    return fromResponse(response);
  }
}

function toForm(fields: Record<string, unknown>): FormData {
  const form = new FormData();
  const filename = typeof fields["filename"] === "string" ? fields["filename"] : undefined;
  for (const [name, value] of Object.entries(fields)) {
    if (name === "filename" || value === undefined || value === null) continue;
    if (value instanceof Blob) form.append(name, value, filename ?? (value as { name?: string }).name ?? "file");
    else form.append(name, String(value));
  }
  return form;
}
