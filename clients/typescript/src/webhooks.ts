/**
 * Verify the service's event webhooks (`/api/webhooks`) in Node.js: Standard Webhooks.
 *
 * Each delivery carries `webhook-id` (the event's id: the same for every retry and
 * resend of it, so a receiver can drop repeats), `webhook-timestamp` (Unix seconds of
 * the attempt) and `webhook-signature`: `v1,` and the base64 HMAC-SHA256, keyed with
 * the base64-decoded part of the endpoint's `whsec_` secret, over
 * `"{webhook-id}.{webhook-timestamp}.{raw body}"`. Several space-separated signatures
 * may be sent (a rotation); one matching is enough.
 *
 * ```ts
 * import { verifyWebhook, WebhookVerificationError } from "agentsvc-client/webhooks";
 *
 * try {
 *   const event = verifyWebhook(secret, req.headers, rawBody);
 *   // event: { type: "message.created", timestamp: "...", data: {...} }
 * } catch (exc) {
 *   if (exc instanceof WebhookVerificationError) { res.writeHead(400).end(exc.reason); return; }
 *   throw exc;
 * }
 * ```
 *
 * Pass the raw body as received: parsing and serialising it again changes the bytes.
 */

import { createHmac, timingSafeEqual } from "node:crypto";

import { AgentsvcError } from "./errors.js";

export const DEFAULT_TOLERANCE_S = 300; // five minutes, as the specification's libraries
const PREFIX = "whsec_";
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The delivery is not authentic, or stale; `reason` says which. */
export class WebhookVerificationError extends AgentsvcError {
  constructor(readonly reason: string) {
    super(`webhook refused: ${reason}`);
  }
}

/** A request's headers: a `Headers`, or Node's `req.headers` (any case). */
export type HeadersLike =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : value;
  }
  return undefined;
}

function key(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (!encoded || !BASE64.test(encoded)) throw new WebhookVerificationError("the secret is not a whsec_ secret");
  return Buffer.from(encoded, "base64");
}

export interface VerifyOptions {
  /** How far the timestamp may be from now, in seconds (300). */
  toleranceS?: number;
  /** Now, in Unix seconds (the current time by default). */
  now?: number;
}

/**
 * The delivery's event (its JSON body, parsed) when `headers` sign `body` with
 * `secret` within the tolerance of now; otherwise throws `WebhookVerificationError`.
 */
export function verifyWebhook(
  secret: string,
  headers: HeadersLike,
  body: string | Uint8Array,
  options: VerifyOptions = {},
): unknown {
  const msgId = header(headers, "webhook-id");
  const stamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!msgId || !stamp || !signatures) {
    throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature");
  }
  if (!/^[0-9]{1,12}$/.test(stamp)) throw new WebhookVerificationError("the timestamp is not a whole number");
  const at = Number(stamp);
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - at) > (options.toleranceS ?? DEFAULT_TOLERANCE_S)) {
    throw new WebhookVerificationError("the timestamp is outside the tolerance");
  }
  const raw = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
  const expected = createHmac("sha256", key(secret))
    .update(`${msgId}.${at}.`)
    .update(raw)
    .digest();
  for (const candidate of signatures.split(" ")) {
    const comma = candidate.indexOf(",");
    if (comma === -1 || candidate.slice(0, comma) !== "v1") continue;
    const value = candidate.slice(comma + 1);
    if (!BASE64.test(value)) continue;
    const given = Buffer.from(value, "base64");
    if (given.length === expected.length && timingSafeEqual(given, expected)) {
      return JSON.parse(raw.toString("utf8")) as unknown;
    }
  }
  throw new WebhookVerificationError("no signature matches");
}

/** The `webhook-signature` the service would send (for tests of your receiver). */
export function signWebhook(secret: string, msgId: string, timestamp: number, body: string | Uint8Array): string {
  const raw = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
  const mac = createHmac("sha256", key(secret)).update(`${msgId}.${timestamp}.`).update(raw).digest("base64");
  return `v1,${mac}`;
}
