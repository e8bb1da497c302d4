"""The one table from errors to HTTP statuses and codes, framework errors included.

Every error answer has the body ``{"error": CODE, "detail": "..."}``. Details come
from the domain's own messages or from fixed strings here: never from a stack
trace, a driver message or a secret.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, TooManyRequestsException, ValidationException
from litestar.params import ParameterKwarg

from agentsvc_core.errors import (
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    InvalidState,
    NotFound,
    PermissionDenied,
    RateLimited,
    StorageError,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMedia,
    Upstream,
)
from agentsvc_core.ports.sandboxes import SandboxGone, SandboxUnavailable
from agentsvc_web.access_log import redact
from agentsvc_web.body import BodyCutShort, BodyInvalid, MalformedBody, UnsupportedMediaType
from agentsvc_web.schemas import ErrorBody

log = logging.getLogger("agentsvc.web")

_CODE_BY_STATUS: Mapping[int, str] = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "VALIDATION_ERROR",
    429: "RATE_LIMITED",
    500: "INTERNAL_ERROR",
    502: "UPSTREAM_ERROR",
    503: "UNAVAILABLE",
}

# Framework errors whose message is not ours to show: a fixed detail per status.
_FIXED_DETAIL: Mapping[int, str] = {
    400: "malformed request",
    404: "no such resource",
    405: "method not allowed on this path",
    413: "request body is too large",
}

_BEARER = {"WWW-Authenticate": 'Bearer realm="agentsvc"'}


def to_camel(field: str) -> str:
    """``stable_preamble.x`` -> ``stablePreamble.x``: clients named fields in camelCase."""
    head, dot, rest = field.partition(".")
    first, *others = head.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in others) + dot + rest


def error_response(
    status: int,
    detail: str | None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response[ErrorBody]:
    return Response(
        ErrorBody(error=code or _CODE_BY_STATUS.get(status, "ERROR"), detail=detail),
        status_code=status,
        headers=dict(headers) if headers else None,
        media_type="application/json",
    )


def _sandbox(_: Request[Any, Any, Any], exc: DomainError) -> Response[ErrorBody]:
    """A computer's provider is not installed or not configured (its detail says
    what to install or set; no Retry-After: it will not pass by itself), or its
    sandbox is gone."""
    if isinstance(exc, SandboxGone):
        return error_response(409, exc.detail, "SANDBOX_GONE")
    return error_response(503, exc.detail)


def _domain(_: Request[Any, Any, Any], exc: DomainError) -> Response[ErrorBody]:
    match exc:
        case InvalidInput():
            return error_response(422, f"{to_camel(exc.field)}: {exc.problem}")
        case IdempotencyKeyReused():
            return error_response(422, exc.detail, "IDEMPOTENCY_KEY_REUSED")
        case NotFound():
            return error_response(404, exc.detail)
        case Unauthenticated():
            return error_response(401, exc.detail, headers=_BEARER)
        case PermissionDenied():
            return error_response(403, exc.detail)
        case Conflict():
            return error_response(409, exc.detail, exc.code)
        case TooLarge():
            return error_response(413, exc.detail)
        case UnsupportedMedia():
            return error_response(415, exc.detail)
        case Upstream():
            return error_response(502, exc.detail, exc.code)
        case Unavailable():
            return error_response(503, exc.detail, headers={"Retry-After": "1"})
        case InvalidState():
            # the OAuth callback's state is unknown, expired or already used
            return error_response(400, exc.detail)
        case StorageError():
            # a 500 is a bug to find: the trace (and its cause's) goes to the log
            log.error("storage error: %s", exc.__cause__ or exc, exc_info=exc)
            return error_response(500, "internal error")
    # A domain error nobody mapped is a bug, not the client's fault. Its class only:
    # details of internal errors may carry what a client must not see.
    log.error("unmapped domain error %s", type(exc).__qualname__)
    return error_response(500, "internal error")


# Litestar's message for a required parameter that is absent (its ``extra`` is empty)
_MISSING = re.compile(r"^Missing required (\w+) parameter '([^']+)'")


def _client_name(request: Request[Any, Any, Any], key: str) -> str:
    """The name the client sent a parameter under (``agentId``, ``state``), from the
    handler's ``QueryParameter(name=...)``; Litestar reports the Python name."""
    handler = request.scope.get("route_handler")
    fields = getattr(getattr(handler, "parsed_fn_signature", None), "parameters", {})
    kwarg = getattr(fields.get(key), "kwarg_definition", None)
    if isinstance(kwarg, ParameterKwarg):
        return kwarg.query or kwarg.header or kwarg.cookie or kwarg.name or key
    return key


def _validation_detail(
    request: Request[Any, Any, Any], exc: ValidationException
) -> tuple[int, str]:
    """Litestar's parameter errors: a query or path parameter that is missing, of
    the wrong type or out of bounds is 422 naming it as the client sends it; a body
    that is absent is 400 (a body that is present is decoded, and refused, by
    ``agentsvc_web.body``)."""
    items = exc.extra if isinstance(exc.extra, list) else []
    for item in items:
        if not isinstance(item, dict):
            continue
        message = str(item.get("message", "invalid value"))
        key = str(item.get("key", ""))
        if key == "data" and item.get("source") == "body":
            return 400, "request body must be a JSON object"
        if key:
            return 422, f"{_client_name(request, key)}: {message}"
        return 422, message
    missing = _MISSING.match(str(exc.detail))
    if missing is not None:
        kind, name = missing.groups()
        return 422, f"{name}: missing required {kind} parameter"
    return 422, "invalid request"


def _http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[ErrorBody]:
    status = exc.status_code
    headers = dict(exc.headers or {})
    if isinstance(exc, ValidationException):
        status, detail = _validation_detail(request, exc)
    elif isinstance(
        exc,
        MalformedBody
        | BodyInvalid
        | BodyCutShort
        | UnsupportedMediaType
        | TooManyRequestsException,
    ):
        # ours (agentsvc_web.body, and the budgets of agentsvc_web.limits: the app
        # runs no Litestar middleware that raises 429), written for clients
        detail = exc.detail
        if isinstance(exc, BodyCutShort):
            log.info("%s %s: %s", request.method, redact(request.url.path), detail)
    elif status == 401:
        detail = "missing or invalid credentials"
        headers.update(_BEARER)
    elif status >= 500:
        log.error("HTTP %s raised by the framework: %s", status, exc.detail)
        detail = "internal error"
    else:
        # 400 (a bad Content-Length, say), 404, 405, 413: the framework's message
        # is not shown; the status says it.
        detail = _FIXED_DETAIL.get(status, "request refused")
    return error_response(status, detail, headers=headers)


def _rate_limited(_: Request[Any, Any, Any], exc: RateLimited) -> Response[ErrorBody]:
    # a limit of the domain's (a published chat's daily cost cap): 429 with its code
    wait = {"Retry-After": str(max(1, exc.retry_after_s))}
    return error_response(429, exc.detail, exc.code, headers=wait)


def _too_deep(_: Request[Any, Any, Any], exc: RecursionError) -> Response[ErrorBody]:
    # A body nested thousands of levels deep exhausts the JSON decoder's stack.
    return error_response(400, "request body is nested too deeply")


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorBody]:
    log.exception("unhandled error on %s %s", request.method, redact(request.url.path))
    return error_response(500, "internal error")


EXCEPTION_HANDLERS: dict[int | type[Exception], Any] = {
    DomainError: _domain,
    RateLimited: _rate_limited,
    SandboxUnavailable: _sandbox,
    SandboxGone: _sandbox,
    HTTPException: _http,
    RecursionError: _too_deep,
    Exception: _unexpected,
}
