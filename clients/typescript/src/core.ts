/**
 * What the generated resources need from the client: one `request` for a plain call,
 * and the reply's streams. Written by hand; `resources.ts` is generated against it.
 */

import type { ReplyStream } from "./stream.js";
import type { ThreadEventStream } from "./thread-events.js";

/** Per-call options, the last argument of every method. */
export interface RequestOptions {
  /**
   * Sent as `Idempotency-Key` on a POST: a retry with the same key gets the first
   * answer again, and stores nothing twice. A reply's send always carries one (a
   * fresh UUID unless you give one).
   */
  idempotencyKey?: string | undefined;
  /** Aborts the call (and, for a stream, stops reading it: the reply goes on). */
  signal?: AbortSignal | undefined;
  /** Extra headers for this call (`traceparent`, ...). */
  headers?: Record<string, string> | undefined;
}

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** How to read an answer: JSON, text, bytes, nothing, or every SSE event to the end. */
export type AnswerKind = "json" | "text" | "bytes" | "none" | "events";

export interface Call {
  method: Method;
  path: string;
  /** Query parameters (undefined and null ones are left out). */
  query?: Record<string, unknown> | undefined;
  /** `query` keys sent as headers instead: `{ lastEventId: "Last-Event-ID" }`. */
  headerParams?: Record<string, string> | undefined;
  /** A JSON body. */
  body?: unknown;
  /** A multipart form: Blobs are files (named `filename`), the rest text. */
  form?: Record<string, unknown> | undefined;
  answer: AnswerKind;
  options?: RequestOptions | undefined;
}

/** A send's (or an edit's, or a regenerate's) reply stream. */
export interface ReplyCall {
  threadId: string;
  path: string;
  body: unknown;
  options?: RequestOptions | undefined;
}

export interface Requester {
  request(call: Call): Promise<unknown>;
  replyStream(call: ReplyCall): ReplyStream;
  attachStream(
    threadId: string,
    query: { runId?: string | null; after?: number; lastEventId?: number | string },
    options?: RequestOptions,
  ): ReplyStream;
  threadEventStream(
    threadId: string,
    query: { after?: number | null; lastEventId?: number | string },
    options?: RequestOptions,
  ): ThreadEventStream;
}

/**
 * One Server-Sent Event, typed by a map of event name -> data: `type` is the SSE
 * `event:`, `id` its `id:` (0 when it has none), `data` its parsed JSON.
 */
export type StreamEvent<M> = {
  [K in keyof M & string]: { type: K; id: number; data: M[K] };
}[keyof M & string];

/** A path segment, percent-encoded: an id of "../keys" must not name another route. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

/**
 * A random UUID (v4): Web Crypto's where there is one (browsers, Node.js 19+);
 * Node.js 18 has no global `crypto`, and gets one from `Math.random`, which is
 * enough for what it is used for: an idempotency key, unique, not secret.
 */
export function uuid4(): string {
  const c = (globalThis as { crypto?: Crypto }).crypto;
  if (c && typeof c.randomUUID === "function") return c.randomUUID();
  const bytes = new Uint8Array(16);
  if (c && typeof c.getRandomValues === "function") c.getRandomValues(bytes);
  else for (let i = 0; i < 16; i++) bytes[i] = Math.floor(Math.random() * 256);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
