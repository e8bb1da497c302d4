"""The exception tree. Every error the client raises is an ``AgentsvcError``.

::

    AgentsvcError                 status, error, detail, request_id
    ├── BadRequest                400 BAD_REQUEST (not JSON, not an object)
    ├── Unauthorized              401 (no, unknown, revoked or expired credential)
    ├── Forbidden                 403 (not yours to use)
    ├── NotFound                  404 (unknown, or another organization's)
    ├── MethodNotAllowed          405
    ├── Conflict                  409
    │   └── ThreadBusy            409 THREAD_BUSY (a reply is still running)
    ├── PayloadTooLarge           413
    ├── UnsupportedMediaType      415
    ├── ValidationError           422 (detail names the field)
    ├── RateLimited               429 (retry_after, seconds)
    ├── ServerError               5xx
    ├── UnexpectedResponse        a 2xx answer that is not what the document promises
    ├── ReplyError                the reply ended with an ``error`` event (code, detail)
    └── APIConnectionError        no answer: connect, read or protocol error, timeout
        └── StreamInterrupted     the reply's stream dropped and re-attaching gave up

The service's error body is ``{"error": CODE, "detail": "..."}``; ``request_id`` is
its ``X-Request-Id`` header, the one to quote in a bug report (the service logs it).
"""

from __future__ import annotations

import httpx
import msgspec


class AgentsvcError(Exception):
    """Base of every error the client raises."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error: str | None = None,
        detail: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.detail = detail
        self.request_id = request_id


class BadRequest(AgentsvcError):
    """400."""


class Unauthorized(AgentsvcError):
    """401: no, malformed, unknown, revoked or expired credential."""


class Forbidden(AgentsvcError):
    """403: authenticated, but no access to this resource."""


class NotFound(AgentsvcError):
    """404: unknown id, or another organization's (existence is not disclosed)."""


class MethodNotAllowed(AgentsvcError):
    """405."""


class Conflict(AgentsvcError):
    """409."""


class ThreadBusy(Conflict):
    """409 ``THREAD_BUSY``: the thread's previous reply still runs; wait, stop it, or
    re-attach to it (``client.threads.attach``)."""


class PayloadTooLarge(AgentsvcError):
    """413: the body is over the service's limit."""


class UnsupportedMediaType(AgentsvcError):
    """415."""


class ValidationError(AgentsvcError):
    """422: a field is missing, of the wrong type or out of bounds; ``detail`` names it."""


class RateLimited(AgentsvcError):
    """429: the key's request budget is spent; ``retry_after`` seconds (or None)."""

    retry_after: float | None = None


class ServerError(AgentsvcError):
    """5xx."""


class UnexpectedResponse(AgentsvcError):
    """A 2xx answer the client could not read as the document describes it."""


class ReplyError(AgentsvcError):
    """The reply ended with an ``error`` event (``PROVIDER_*``, ``INTERRUPTED``...);
    ``error`` is its code. Your message is stored either way."""


class APIConnectionError(AgentsvcError):
    """No answer from the service: connection refused or cut, timeout, protocol error."""


class StreamInterrupted(APIConnectionError):
    """A reply's stream dropped and re-attaching failed ``attempts`` times in a row.

    The reply itself goes on in the service: ``run_id`` (None if it never started)
    and ``last_event_id`` let you re-attach later (``client.threads.attach``)."""

    def __init__(
        self, message: str, *, run_id: str | None, last_event_id: int, attempts: int
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.last_event_id = last_event_id
        self.attempts = attempts


_BY_STATUS: dict[int, type[AgentsvcError]] = {
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
}


class _ErrorBody(msgspec.Struct):
    error: str | None = None
    detail: str | None = None


def from_response(response: httpx.Response) -> AgentsvcError:
    """The exception for an error answer (its body must have been read)."""
    status = response.status_code
    try:
        body = msgspec.json.decode(response.content, type=_ErrorBody)
    except (msgspec.DecodeError, msgspec.ValidationError):
        body = _ErrorBody(detail=response.text[:500] or None)
    if status >= 500:
        cls: type[AgentsvcError] = ServerError
    elif status == 409 and body.error == "THREAD_BUSY":
        cls = ThreadBusy
    else:
        cls = _BY_STATUS.get(status, AgentsvcError)
    message = f"{status} {body.error or response.reason_phrase}: {body.detail or ''}".rstrip(": ")
    exc = cls(
        message,
        status=status,
        error=body.error,
        detail=body.detail,
        request_id=response.headers.get("x-request-id"),
    )
    if isinstance(exc, RateLimited):
        try:
            exc.retry_after = float(response.headers.get("retry-after", ""))
        except ValueError:
            exc.retry_after = None
    return exc


__all__ = [
    "APIConnectionError",
    "AgentsvcError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "ReplyError",
    "ServerError",
    "StreamInterrupted",
    "ThreadBusy",
    "Unauthorized",
    "UnexpectedResponse",
    "UnsupportedMediaType",
    "ValidationError",
]
