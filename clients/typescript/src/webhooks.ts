/**
 * Verify what the service signs, in Node.js: its event webhooks (`verifyWebhook`,
 * Standard Webhooks), and its signed calls to your webhook tools and credential
 * resolver (`verifySignedCall`, the `X-Service-*` headers).
 *
 * Event webhooks (`/api/webhooks`):
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

// --- the service's signed calls: webhook tools, the credential resolver -------------

/**
 * Remembers nonces while their timestamp is within the tolerance; `add` answers false
 * for one already there. Several receiver processes need a shared one (Redis
 * `SET NX EX`, a table with a unique key): give `verifySignedCall` an object with
 * this method.
 */
export interface NonceCache {
  add(nonce: string, expiresAt: number): boolean;
}

/** A process-local `NonceCache`. */
export class MemoryNonceCache implements NonceCache {
  private readonly seen = new Map<string, number>();

  add(nonce: string, expiresAt: number): boolean {
    const now = Date.now() / 1000;
    for (const [old, until] of this.seen) if (until < now) this.seen.delete(old);
    if (this.seen.has(nonce)) return false;
    this.seen.set(nonce, expiresAt);
    return true;
  }
}

export interface SignedCallOptions extends VerifyOptions {
  /** Refuses a nonce seen before (a replay); without one, replays within the tolerance pass. */
  nonceCache?: NonceCache;
}

/** The `X-Service-Signature` the service computes (for tests of your receiver). */
export function signCall(secret: string, timestamp: string, nonce: string, body: string | Uint8Array): string {
  const raw = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body);
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(`${timestamp}.${nonce}.`).update(raw).digest("hex");
}

/**
 * Return when a call from the service (a webhook tool's, the credential resolver's)
 * is authentic and fresh; otherwise throw `WebhookVerificationError`.
 *
 * `X-Service-Signature` is the lowercase hex HMAC-SHA256, keyed with the UTF-8 bytes
 * of the organization's signing secret (`(await client.settings.get()).signing_secret`),
 * over `"{X-Service-Timestamp}.{X-Service-Nonce}.{raw body}"`; during a rotation the
 * service sends two, space-separated, and one matching is enough. `secrets`: yours,
 * or several while you rotate yours. The nonce is recorded only for a call whose
 * signature checks out, so forged calls cannot fill the cache.
 */
export function verifySignedCall(
  secrets: string | readonly string[],
  headers: HeadersLike,
  body: string | Uint8Array,
  options: SignedCallOptions = {},
): void {
  const timestamp = header(headers, "x-service-timestamp") ?? "";
  const nonce = header(headers, "x-service-nonce") ?? "";
  const signatures = (header(headers, "x-service-signature") ?? "")
    .split(" ")
    .filter((v) => /^[0-9a-f]{64}$/.test(v));
  const tolerance = options.toleranceS ?? DEFAULT_TOLERANCE_S;
  if (!/^[0-9]{1,12}$/.test(timestamp)) throw new WebhookVerificationError("missing or malformed timestamp");
  if (Math.abs((options.now ?? Date.now() / 1000) - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError("timestamp outside the tolerance");
  }
  if (!nonce) throw new WebhookVerificationError("missing nonce");
  if (!signatures.length) throw new WebhookVerificationError("missing signature");
  const keys = typeof secrets === "string" ? [secrets] : secrets;
  const expected = keys.map((key) => Buffer.from(signCall(key, timestamp, nonce, body), "hex"));
  const given = signatures.map((v) => Buffer.from(v, "hex"));
  if (!expected.some((e) => given.some((g) => timingSafeEqual(e, g)))) {
    throw new WebhookVerificationError("no signature matches");
  }
  if (options.nonceCache && !options.nonceCache.add(nonce, Number(timestamp) + tolerance)) {
    throw new WebhookVerificationError("replayed nonce");
  }
}
