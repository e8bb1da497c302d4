/**
 * The errors the client throws. Every one is an `AgentsvcError`.
 *
 * ```
 * AgentsvcError                 status, error, detail, requestId, body
 * ├── BadRequest                400 (not JSON, not an object)
 * ├── Unauthorized              401 (no, unknown, revoked or expired credential)
 * ├── Forbidden                 403 (not yours to use)
 * ├── NotFound                  404 (unknown, or another organization's)
 * ├── Conflict                  409
 * │   └── ThreadBusy            409 THREAD_BUSY (a reply is still running)
 * ├── PayloadTooLarge           413
 * ├── UnsupportedMediaType      415
 * ├── ValidationError           422 (detail names the field)
 * ├── RateLimited               429 (retryAfter, seconds)
 * ├── ServerError               5xx
 * ├── UnexpectedResponse        a 2xx answer that is not what the document promises
 * ├── ReplyError                the reply ended with an `error` event (error = its code)
 * └── APIConnectionError        no answer: connection refused or cut
 *     └── StreamInterrupted     the reply's stream dropped and re-attaching gave up
 * ```
 *
 * The service's error body is `{"error": CODE, "detail": "..."}`; `requestId` is its
 * `X-Request-Id` header, the one to quote in a bug report (the service logs it).
 */

export interface ErrorFields {
  status?: number | undefined;
  error?: string | undefined;
  detail?: string | undefined;
  requestId?: string | undefined;
  body?: unknown;
  cause?: unknown;
}

export class AgentsvcError extends Error {
  /** The HTTP status, when there was an answer. */
  readonly status: number | undefined;
  /** The error body's code (`NOT_FOUND`, `VALIDATION_ERROR`, ...) or a stream's error code. */
  readonly error: string | undefined;
  /** The error body's detail: what was wrong, in words. */
  readonly detail: string | undefined;
  /** The answer's `X-Request-Id`. */
  readonly requestId: string | undefined;
  /** The error body as answered (parsed JSON, or the text when it is not JSON). */
  readonly body: unknown;

  constructor(message: string, fields: ErrorFields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = new.target.name;
    this.status = fields.status;
    this.error = fields.error;
    this.detail = fields.detail;
    this.requestId = fields.requestId;
    this.body = fields.body;
  }
}

export class BadRequest extends AgentsvcError {}
export class Unauthorized extends AgentsvcError {}
export class Forbidden extends AgentsvcError {}
export class NotFound extends AgentsvcError {}
export class MethodNotAllowed extends AgentsvcError {}
export class Conflict extends AgentsvcError {}
/** 409 `THREAD_BUSY`: the thread's reply still runs; wait, stop it, or re-attach. */
export class ThreadBusy extends Conflict {}
export class PayloadTooLarge extends AgentsvcError {}
export class UnsupportedMediaType extends AgentsvcError {}
export class ValidationError extends AgentsvcError {}
export class RateLimited extends AgentsvcError {
  /** `Retry-After`, in seconds, when the service said it. */
  retryAfter: number | undefined;
}
export class ServerError extends AgentsvcError {}
export class UnexpectedResponse extends AgentsvcError {}
/** The reply ended with an `error` event (`PROVIDER_*`, `INTERRUPTED`...): `error` is its code. */
export class ReplyError extends AgentsvcError {}
/** No answer from the service: connection refused or cut. */
export class APIConnectionError extends AgentsvcError {}

/**
 * A reply's stream dropped and re-attaching failed `attempts` times in a row. The
 * reply goes on in the service: `runId` (undefined if it never started) and
 * `lastEventId` pick it up later (`client.threads.attach`).
 */
export class StreamInterrupted extends APIConnectionError {
  constructor(
    message: string,
    readonly runId: string | undefined,
    readonly lastEventId: number,
    readonly attempts: number,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

const BY_STATUS: Record<number, typeof AgentsvcError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  405: MethodNotAllowed,
  409: Conflict,
  413: PayloadTooLarge,
  415: UnsupportedMediaType,
  422: ValidationError,
  429: RateLimited,
};

/** The error for an answer whose status is not 2xx (reads its body). */
export async function fromResponse(response: Response): Promise<AgentsvcError> {
  const text = await response.text().catch(() => "");
  let body: unknown = text;
  let error: string | undefined;
  let detail: string | undefined;
  try {
    body = JSON.parse(text);
    if (body && typeof body === "object") {
      const fields = body as { error?: unknown; detail?: unknown };
      if (typeof fields.error === "string") error = fields.error;
      if (typeof fields.detail === "string") detail = fields.detail;
    }
  } catch {
    detail = text.slice(0, 500) || undefined;
  }
  const status = response.status;
  let cls: typeof AgentsvcError = BY_STATUS[status] ?? AgentsvcError;
  if (status >= 500) cls = ServerError;
  else if (status === 409 && error === "THREAD_BUSY") cls = ThreadBusy;
  const message = `${status} ${error ?? response.statusText}${detail ? `: ${detail}` : ""}`;
  const requestId = response.headers.get("x-request-id") ?? undefined;
  const exc = new cls(message, { status, error, detail, requestId, body });
  if (exc instanceof RateLimited) {
    const after = Number.parseFloat(response.headers.get("retry-after") ?? "");
    exc.retryAfter = Number.isFinite(after) ? after : undefined;
  }
  return exc;
}
